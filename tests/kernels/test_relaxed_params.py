"""The lossy acceptance rules under per-request sampling parameters (specreg.kernels.relaxed):
at thresholds (1, 1) the path is the lossless params verify token for token (masks and penalties
included); under each lossy rule torch and Triton (interpreter) equal the per-request reference
on reference-filtered probabilities at fixed keys and positions; greedy rows are plain greedy; a seeded
request does not depend on its batch; the chain and block verifiers run it for params= (no
SR196) and refuse processed logprobs of its results (SR199)."""

import pytest
import torch

from specreg import Registry
from specreg.contract.acceptance_rules import AcceptanceRule
from specreg.step.chain_verifier import ChainVerifier
from specreg.errors import KernelInputError
from specreg.kernels.chain import verify_chain_greedy
from specreg.kernels.chain_params import prepare_chain_params, verify_chain_with_params
from specreg.kernels.logprobs import emitted_logprobs
from specreg.kernels.penalties import Penalties
from specreg.kernels.relaxed import RuleParams, verify_chain_relaxed_with_params
from specreg.kernels.relaxed.reference import verify_chain_relaxed_with_params_reference
from specreg.kernels.relaxed.types import SYNTHETIC, THRESHOLDS, TYPICAL
from specreg.kernels.token_mask import bitmask_words
from specreg.contract.sampling_params import SamplingParams

V = 64
RULES = (
    RuleParams(mode=THRESHOLDS, threshold_single=0.3, threshold_acc=0.5),
    RuleParams(mode=TYPICAL, posterior_threshold=0.2, posterior_alpha=0.5),
    RuleParams(mode=SYNTHETIC, rates=(0.9, 0.6, 0.3)),
)
DEFAULTS = RuleParams(mode=THRESHOLDS)  # (1, 1): the lossless rule through the lossy kernel


def _params(b):
    temps = [0.0, 0.7, 1.0, 1.4, 0.0, 0.9, 1.2, 0.5][:b]
    return SamplingParams.of(
        batch=b, temperature=temps, top_k=[0, 6, 0, 12, 0, 0, 3, 0][:b],
        top_p=[1.0, 0.9, 0.8, 1.0, 1.0, 1.0, 1.0, 0.7][:b],
        min_p=[0.0, 0.0, 0.05, 0.0, 0.0, 0.1, 0.0, 0.0][:b], seed=list(range(11, 11 + b)),
    )


def _case(seed, b=8, n=4):
    gen = torch.Generator().manual_seed(seed)
    target = 2 * torch.randn(b, n, V, generator=gen)
    target[..., :6] += 3.0  # drafts come from the likely low ids, so runs get accepted
    draft = target[:, :-1] + torch.randn(b, n - 1, V, generator=gen)  # q near p: coins matter
    candidates = torch.randint(0, 6, (b, n), generator=gen)
    drawn = torch.multinomial(torch.softmax(draft.reshape(-1, V), -1), 1, generator=gen)
    candidates[:, 1:] = drawn.reshape(b, n - 1)  # drafts drawn from q (at temperature 1)
    return candidates, target, draft


def _same(a, b, rows=slice(None)):
    assert torch.equal(a.accept_len[rows].long(), b.accept_len[rows].long())
    assert torch.equal(a.bonus[rows], b.bonus[rows])
    assert torch.equal(a.output_tokens[rows], b.output_tokens[rows])


def _extras(b, n, gen):
    """A grammar-style bitmask (some tokens banned per position) and penalties."""
    allowed = torch.rand(b, n, V, generator=gen) > 0.25
    allowed[..., :3] = True
    bits = torch.zeros(b, n, bitmask_words(V), dtype=torch.int64)
    for v in range(V):
        bits[..., v // 32] |= allowed[..., v].long() << (v % 32)
    mask = torch.where(bits >= 2**31, bits - 2**32, bits).to(torch.int32)
    penalties = Penalties.of(b, repetition=1.3, frequency=0.4, presence=0.2,
                             output=[[1, 2]] * b, logit_bias=[{4: 1.5}] * b)
    return mask, penalties


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_defaults_equal_the_lossless_params_verify_with_masks_and_penalties(backend):
    """Thresholds (1, 1) on the filtered rows are the lossless params rule: same tokens at the
    same per-request keys and positions, so the lossless chi-square proofs of that path carry over."""
    gen = torch.Generator().manual_seed(3)
    steps = 12 if backend == "torch" else 2  # the interpreter runs each program in Python
    agreed = 0
    for step in range(steps):
        candidates, target, draft = _case(step, b=8 if backend == "torch" else 4)
        b, n, _ = target.shape
        mask, penalties = _extras(b, n, gen) if step % 2 else (None, None)
        params, positions = _params(b), torch.full((b,), step)
        # the interpreter runs each program in Python: Triton takes one draft mode per step
        for d in (draft, None) if backend == "torch" else ((draft, None)[step % 2],):
            lossless = verify_chain_with_params(
                candidates, target.clone(), None if d is None else d.clone(), params=params,
                positions=positions, token_bitmask=mask, penalties=penalties)
            lossy = verify_chain_relaxed_with_params(
                candidates, target.clone(), None if d is None else d.clone(), rule=DEFAULTS,
                params=params, positions=positions, token_bitmask=mask, penalties=penalties,
                backend=backend)
            _same(lossless, lossy)
            agreed += int(lossy.accept_len.sum())
    assert agreed > 0  # some drafts were accepted: the comparison covers the walk


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_each_rule_equals_the_reference_on_filtered_probabilities(backend):
    """Fixed coins; the oracle filters each row with the plain sorting reference and runs the
    per-row relaxed reference; greedy rows are plain greedy (synthetic: its count, argmax)."""
    torch_backend = backend == "torch"
    b = 8 if torch_backend else 4
    lens = torch.tensor([4, 2, 1, 4, 3, 4, 4, 2][:b])  # Triton: one input set (target-only: the defaults test)
    for step in range(2 if torch_backend else 1):
        candidates, target, draft = _case(10 + step, b=b)
        params = _params(b)
        for rule in RULES:
            inputs_of = ((draft, None), (draft, lens), (None, lens))
            for d, verify_lens in inputs_of if torch_backend else inputs_of[1:2]:
                inputs = prepare_chain_params(candidates, target, d, params=params,
                                              verify_lens=verify_lens,
                                              positions=torch.full((b,), step))
                found = verify_chain_relaxed_with_params(
                    candidates, target, d, rule=rule, params=params, coins=inputs.coins,
                    keys=inputs.keys, positions=inputs.positions, verify_lens=verify_lens,
                    backend=backend)
                _same(found, verify_chain_relaxed_with_params_reference(inputs, rule))


def test_thresholds_accept_more_than_lossless_and_greedy_rows_stay_plain_greedy():
    candidates, target, draft = _case(20)
    b = target.shape[0]
    params = _params(b)
    greedy = params.greedy
    plain = verify_chain_greedy(candidates, target)
    total = {"lossless": 0, "lossy": 0}
    for step in range(20):
        positions = torch.full((b,), step)
        lossless = verify_chain_with_params(candidates, target, draft, params=params,
                                            positions=positions)
        for rule in RULES[:2]:
            lossy = verify_chain_relaxed_with_params(candidates, target, draft, rule=rule,
                                                     params=params, positions=positions)
            _same(lossy, plain, greedy)
        lossy = verify_chain_relaxed_with_params(candidates, target, draft, rule=RULES[0],
                                                 params=params, positions=positions)
        total["lossless"] += int(lossless.accept_len[~greedy].sum())
        total["lossy"] += int(lossy.accept_len[~greedy].sum())
    assert total["lossy"] > total["lossless"], total


def test_seeded_requests_do_not_depend_on_the_batch_and_bad_params_are_flagged():
    candidates, target, draft = _case(30)
    b = target.shape[0]
    params = _params(b)
    whole = verify_chain_relaxed_with_params(candidates, target, draft, rule=RULES[0],
                                             params=params)
    for r in range(b):
        one = torch.tensor([r])
        alone = verify_chain_relaxed_with_params(
            candidates[one], target[one], draft[one], rule=RULES[0], params=params.select(one))
        assert torch.equal(alone.output_tokens[0], whole.output_tokens[r])
        assert int(alone.accept_len[0]) == int(whole.accept_len[r])
    bad = SamplingParams.of(batch=b, temperature=params.temperature.tolist(),
                            top_p=[1.0, 2.0] + [1.0] * (b - 2), seed=list(range(b)))
    with pytest.raises(KernelInputError):
        verify_chain_relaxed_with_params(candidates, target, draft, rule=RULES[0], params=bad)
    flagged = verify_chain_relaxed_with_params(candidates, target, draft, rule=RULES[0],
                                               params=bad, check_values=False)
    assert flagged.param_error.tolist() == [False, True] + [False] * (b - 2)
    assert int(flagged.accept_len[1]) == 0 and int(flagged.bonus[1]) == -1


def test_chain_and_block_verifiers_run_the_rule_for_params_and_refuse_processed_logprobs():
    candidates, target, draft = _case(40)
    b = target.shape[0]
    params = _params(b)
    positions = torch.arange(b)
    expected = verify_chain_relaxed_with_params(candidates, target, draft, rule=RULES[0],
                                                params=params, positions=positions)
    rule = AcceptanceRule(threshold_single=0.3, threshold_acc=0.5)
    chain = ChainVerifier(4, acceptance=rule, backend="torch")
    block = Registry.load().resolve({"algorithm": "dflash", "num_draft_tokens": 4,
                                "acceptance": {"threshold_single": 0.3, "threshold_acc": 0.5}})
    found = [chain.verify_from_logits(candidates, target, draft, params=params, positions=positions),
             block.verifier.verify_sampling_from_logits(candidates, target, draft,
                                                        params=params, positions=positions)]
    probs = torch.softmax(target, -1), torch.softmax(draft, -1)
    via_probs = chain.verify_sampling(candidates, *probs, params=params, positions=positions)
    reference = verify_chain_relaxed_with_params(candidates, *probs, rule=RULES[0],
                                                 params=params, positions=positions,
                                                 probabilities=True)
    _same(via_probs, reference)
    for result in found:
        _same(result, expected)
        assert result.acceptance == "relaxed_thresholds"
        with pytest.raises(KernelInputError) as raised:
            emitted_logprobs(result, target, params=params)
        assert raised.value.problems[0].code == "SR199"
        raw = emitted_logprobs(result, target, params=params, raw=True)
        assert torch.isfinite(raw.token[:, 0]).all()
    lossless = ChainVerifier(4, backend="torch").verify_from_logits(
        candidates, target, draft, params=params, positions=positions)
    assert lossless.acceptance == "lossless"
    assert torch.isfinite(emitted_logprobs(lossless, target, params=params).token[:, 0]).all()
    synthetic = ChainVerifier(4, acceptance=AcceptanceRule(synthetic_length=2), backend="torch")
    with pytest.raises(KernelInputError) as still:
        synthetic.verify_greedy_from_predict(candidates, target.argmax(-1))
    assert still.value.problems[0].code == "SR196"


def test_eagle_results_name_their_lossy_rule_and_refuse_processed_logprobs():
    from specreg_eagle.verifier import EagleVerifier

    from tests.support.eagle import make_tree

    b, steps, n, vocab = 6, 3, 6, 11
    tree, gen = make_tree(b, 2, steps, n, vocab, 5)
    p = torch.softmax(2 * torch.randn(b, n, vocab, generator=gen), -1)
    params = SamplingParams.of(b, temperature=1.0, seed=list(range(b)))
    relaxed = EagleVerifier(num_steps=steps, topk=2, num_draft_tokens=n,
                            acceptance=AcceptanceRule(threshold_single=0.4, threshold_acc=0.3))
    lossless = EagleVerifier(num_steps=steps, topk=2, num_draft_tokens=n)
    for verifier, rule in ((relaxed, "relaxed_thresholds"), (lossless, "lossless")):
        for result in (verifier.verify_sampling(tree, p, generator=torch.Generator().manual_seed(1)),
                       verifier.verify_sampling(tree, p, params=params)):
            assert result.acceptance == rule
            if rule == "lossless":
                emitted_logprobs(result, p, params=params, probabilities=True)
                continue
            with pytest.raises(KernelInputError) as raised:
                emitted_logprobs(result, p, params=params, probabilities=True)
            assert raised.value.problems[0].code == "SR199"
