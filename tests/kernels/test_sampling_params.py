"""Per-request sampling parameters in chain verification: losslessness under each parameter
(chi-square at fixed seeds, adversarial target/draft pairs, each with a negative control), mixed
greedy/sampled batches, per-request seeds, the filtering rule against its reference, Triton
against torch, and bad parameters.

The lossless tests use a tiny Markov target and drafter over V tokens given as logits. Drafts
are sampled from the drafter's FILTERED distribution (the same parameters), verified by
`verify_chain_with_params`, and the first two emitted tokens must follow the filtered target
P_f(t1 | anchor) P_f(t2 | t1).
"""

import pytest
import torch
from scipy.stats import chisquare

from specreg.contract.config import SpecConfig
from specreg.testing.demo_params import mixed_demo_params
from specreg.errors import KernelInputError
from specreg.kernels.chain import verify_chain_greedy, verify_chain_greedy_from_predict
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.filtering.torch_impl import (
    filter_keys,
    filtered_rows,
    row_stats,
    scaled_scores,
)
from specreg.kernels.filtering.triton_impl import row_stats_triton
from specreg.contract.filter_order import FILTER_RULES
from specreg.kernels.sampling import exponential_race_sample
from specreg.registry.registry import Registry
from specreg.contract.sampling_params import SamplingParams

P_THRESHOLD = 1e-3
SAMPLES = 20_000
V = 6
ANCHOR = 0


def _logits(base: list[float]) -> torch.Tensor:
    """A V x V logit table whose row `prev` is `base` rolled by prev (context dependence)."""
    row = torch.tensor(base, dtype=torch.float32)
    return torch.stack([row.roll(prev) for prev in range(V)])


def _filtered_table(logits: torch.Tensor, **params) -> torch.Tensor:
    return torch.stack(
        [filtered_distribution(row, **params) for row in logits]
    ).to(torch.float32)


# Adversarial (target, draft) logit pairs, one per parameter kind.
CASES = {
    # top-p 0.6 keeps tokens 0 and 1 of the target, cutting inside the draft's wide support
    # (the draft's nucleus is tokens 2, 3, 4).
    "top_p_cuts_inside_draft_support": (
        _logits([2.0, 1.6, 0.0, -0.5, -1.0, -3.0]),
        _logits([0.0, 0.2, 1.0, 0.9, 0.8, 0.5]),
        dict(temperature=1.0, top_p=0.6),
        "draft_unfiltered",
    ),
    # top-k = 1: both distributions collapse to their argmax, and the argmaxes differ.
    "top_k_1": (
        _logits([0.5, 2.0, 1.0, 0.0, -1.0, 0.2]),
        _logits([2.5, 0.1, 1.9, 0.0, -1.0, 0.3]),
        dict(temperature=1.0, top_k=1),
        "target_unfiltered",
    ),
    # min-p 0.2 removes token 3 from the target, the draft's favourite (which the draft's own
    # min-p keeps; it removes the draft's tail instead).
    "min_p_removes_draft_favourite": (
        _logits([1.5, 1.2, 1.0, -0.5, 0.6, -2.0]),
        _logits([0.0, -0.2, -0.5, 2.5, -3.0, -0.1]),
        dict(temperature=1.0, min_p=0.2),
        "draft_unfiltered",
    ),
    "low_temperature": (
        _logits([1.0, 0.8, 0.7, 0.1, -0.2, 0.0]),
        _logits([0.2, 1.0, 0.9, 0.0, 0.5, 0.1]),
        dict(temperature=0.3),
        "draft_unfiltered",
    ),
    "high_temperature": (
        _logits([4.0, 1.0, 0.0, -2.0, 3.0, -4.0]),
        _logits([0.0, 4.0, 2.0, -1.0, -3.0, 1.0]),
        dict(temperature=4.0),
        "draft_unfiltered",
    ),
    "everything_at_once": (
        _logits([2.0, 1.8, 1.7, 1.0, -1.0, 0.5]),
        _logits([1.0, 0.0, 2.0, 1.5, 1.4, -1.0]),
        dict(temperature=0.7, top_k=4, top_p=0.8, min_p=0.1),
        "draft_unfiltered",
    ),
}


def _draft(anchors, q_table, gamma, gen):
    columns = [anchors]
    for _ in range(gamma):
        columns.append(exponential_race_sample(q_table[columns[-1]], generator=gen))
    return torch.stack(columns, dim=1)


def _verify_step(anchors, target_logits, draft_logits, params_kw, gamma, gen, control):
    """One speculative step for every sample; `control` breaks the rule on purpose."""
    b = anchors.shape[0]
    q_filtered = _filtered_table(draft_logits, **params_kw)
    candidates = _draft(anchors, q_filtered, gamma, gen)
    if control is None:
        params = SamplingParams.of(b, **params_kw)
        return verify_chain_with_params(
            candidates, target_logits[candidates], draft_logits[candidates[:, :-1]],
            params=params, generator=gen,
        )
    # Negative controls on precomputed probabilities with neutral parameters: temperature and
    # filter are applied to one side only.
    neutral = SamplingParams.of(b, temperature=1.0)
    if control == "draft_unfiltered":
        p_table = _filtered_table(target_logits, **params_kw)
        q_table = torch.softmax(draft_logits, -1)
    else:  # target_unfiltered
        p_table = torch.softmax(target_logits, -1)
        q_table = q_filtered
    return verify_chain_with_params(
        candidates, p_table[candidates], q_table[candidates[:, :-1]], params=neutral,
        probabilities=True, generator=gen,
    )


def _first_two(target_logits, draft_logits, params_kw, seed, control=None, gamma=3):
    gen = torch.Generator().manual_seed(seed)
    anchors = torch.full((SAMPLES,), ANCHOR, dtype=torch.long)
    out = _verify_step(anchors, target_logits, draft_logits, params_kw, gamma, gen, control)
    first = out.output_tokens[:, 0].clone()
    second = out.output_tokens[:, 1].clone()
    need = second < 0
    again = _verify_step(first[need], target_logits, draft_logits, params_kw, gamma, gen, control)
    second[need] = again.output_tokens[:, 0]
    return first, second


def _pvalue(observed: torch.Tensor, expected: torch.Tensor) -> float:
    counts = torch.bincount(observed, minlength=expected.numel()).double().numpy()
    expected = expected.double().numpy().ravel()
    empty = expected <= 0
    if counts[empty].sum() > 0:
        return 0.0  # a token of filtered target probability 0 was emitted
    counts, expected = counts[~empty], expected[~empty]
    if counts.size == 1:
        return 1.0
    return float(chisquare(counts, expected / expected.sum() * counts.sum()).pvalue)


def _lossless_pvalues(target_logits, first, second, params_kw):
    p_table = _filtered_table(target_logits, **params_kw).double()
    joint = (p_table[ANCHOR][:, None] * p_table).ravel()
    return _pvalue(first, p_table[ANCHOR]), _pvalue(first * V + second, joint)


@pytest.mark.parametrize("name", sorted(CASES))
def test_verification_is_lossless_under_each_parameter(name):
    target_logits, draft_logits, params_kw, _ = CASES[name]
    seed = 500 + sorted(CASES).index(name)
    first, second = _first_two(target_logits, draft_logits, params_kw, seed)
    p_first, p_joint = _lossless_pvalues(target_logits, first, second, params_kw)
    assert p_first > P_THRESHOLD and p_joint > P_THRESHOLD, (p_first, p_joint)


@pytest.mark.parametrize("name", sorted(CASES))
def test_negative_control_filtering_one_side_only_is_detected(name):
    """The same test fails when the filter reaches only one of the two distributions."""
    target_logits, draft_logits, params_kw, control = CASES[name]
    seed = 500 + sorted(CASES).index(name)
    first, second = _first_two(target_logits, draft_logits, params_kw, seed, control=control)
    p_first, p_joint = _lossless_pvalues(target_logits, first, second, params_kw)
    assert min(p_first, p_joint) < 1e-6, (p_first, p_joint)


def test_target_only_rule_is_lossless_with_parameters():
    target_logits, draft_logits, params_kw, _ = CASES["everything_at_once"]
    gen = torch.Generator().manual_seed(77)
    anchors = torch.full((SAMPLES,), ANCHOR, dtype=torch.long)
    candidates = _draft(anchors, _filtered_table(draft_logits, **params_kw), 3, gen)
    out = verify_chain_with_params(
        candidates, target_logits[candidates], None,
        params=SamplingParams.of(SAMPLES, **params_kw), generator=gen,
    )
    p_table = _filtered_table(target_logits, **params_kw)
    assert _pvalue(out.output_tokens[:, 0], p_table[ANCHOR]) > P_THRESHOLD


# ---------------------------------------------------------------------------------------------
# Mixed batches, seeds, ragged batches


def _batch(seed, b=12, n=5, vocab=300):
    gen = torch.Generator().manual_seed(seed)
    target = 2 * torch.randn(b, n, vocab, generator=gen)
    draft = target[:, : n - 1] + 0.7 * torch.randn(b, n - 1, vocab, generator=gen)
    candidates = torch.cat(
        [torch.zeros(b, 1, dtype=torch.long), target.argmax(-1)[:, :-1]], 1
    )
    candidates[::3, 2] = 7  # some chains break early
    return candidates, target, draft


def test_mixed_batch_greedy_rows_equal_plain_greedy():
    candidates, target, draft = _batch(3)
    params = mixed_demo_params(candidates.shape[0])
    greedy = params.greedy
    assert 0 < int(greedy.sum()) < candidates.shape[0]
    lens = torch.tensor([5, 2, 1, 4, 5, 3, 5, 5, 2, 1, 4, 5])
    padded = candidates.clone()
    for r, length in enumerate(lens.tolist()):
        padded[r, length:] = -1
    for verify_lens, cands in ((None, candidates), (lens, padded)):
        mixed = verify_chain_with_params(cands, target, draft, params=params,
                                         verify_lens=verify_lens)
        plain = verify_chain_greedy(candidates, target, verify_lens=verify_lens)
        assert torch.equal(mixed.output_tokens[greedy], plain.output_tokens[greedy])
        assert torch.equal(mixed.accept_len[greedy], plain.accept_len[greedy])
        assert not bool(mixed.param_error.any())
    assert set(plain.accept_len[greedy].tolist()) != {0}


def test_all_greedy_params_equal_plain_greedy_from_probabilities_too():
    candidates, target, draft = _batch(4)
    params = SamplingParams.of(candidates.shape[0], temperature=0.0, top_k=3, top_p=0.5)
    got = verify_chain_with_params(candidates, torch.softmax(target, -1), None, params=params,
                                   probabilities=True)
    assert torch.equal(got.output_tokens, verify_chain_greedy(candidates, target).output_tokens)


def test_same_seed_same_tokens_whatever_the_batch():
    candidates, target, draft = _batch(5)
    b = candidates.shape[0]
    params = mixed_demo_params(b)
    positions = torch.arange(100, 100 + b)
    ref = verify_chain_with_params(candidates, target, draft, params=params, positions=positions)
    for seed in range(3):
        perm = torch.randperm(b, generator=torch.Generator().manual_seed(seed))
        got = verify_chain_with_params(
            candidates[perm], target[perm], draft[perm], params=params.select(perm),
            positions=positions[perm],
        )
        assert torch.equal(got.output_tokens, ref.output_tokens[perm])
    # a different batch composition: half the requests, plus unrelated ones
    keep = torch.arange(0, b, 2)
    other_c, other_t, other_d = _batch(99, b=5)
    mixed_c = torch.cat([other_c, candidates[keep]])
    mixed_t = torch.cat([other_t, target[keep]])
    mixed_d = torch.cat([other_d, draft[keep]])
    other_params = SamplingParams.of(5, temperature=1.5, top_p=0.7, seed=[9, 8, 7, 6, 5])
    both = SamplingParams(**{
        name: torch.cat([getattr(other_params, name), getattr(params.select(keep), name)])
        for name in ("temperature", "top_k", "top_p", "min_p", "seed")
    })
    got = verify_chain_with_params(mixed_c, mixed_t, mixed_d, params=both,
                                   positions=torch.cat([torch.zeros(5, dtype=torch.long),
                                                        positions[keep]]))
    assert torch.equal(got.output_tokens[5:], ref.output_tokens[keep])
    # and the seed matters
    reseeded = SamplingParams(**{**{n: getattr(params, n) for n in
                                    ("temperature", "top_k", "top_p", "min_p")},
                                 "seed": params.seed + 1000})
    outs = [verify_chain_with_params(candidates, target, draft, params=reseeded,
                                     positions=positions + k).output_tokens for k in range(4)]
    assert any(not torch.equal(o, ref.output_tokens) for o in outs)


def test_ragged_padding_is_accepted_and_never_read():
    candidates, target, draft = _batch(6, b=3, n=4)
    lens = torch.tensor([4, 2, 1])
    padded = candidates.clone()
    padded[1, 2:] = -1
    padded[2, 1:] = -1
    params = SamplingParams.of(3, temperature=[0.0, 0.8, 1.2], top_k=[0, 5, 0], seed=[1, 2, 3])
    # poison the rows past each request's length: reading them would change the result
    poisoned_t, poisoned_d = target.clone(), draft.clone()
    poisoned_t[1, 2:] = float("nan")
    poisoned_t[2, 1:] = float("nan")
    poisoned_d[1, 1:] = float("nan")
    poisoned_d[2, :] = float("nan")
    a = verify_chain_with_params(padded, target, draft, params=params, verify_lens=lens)
    b = verify_chain_with_params(padded, poisoned_t, poisoned_d, params=params, verify_lens=lens)
    assert torch.equal(a.output_tokens, b.output_tokens)
    predict = target.argmax(-1)
    predict[1, 2:] = -1
    predict[2, 1:] = -1
    out = verify_chain_greedy_from_predict(padded, predict, verify_lens=lens, vocab_size=300)
    assert torch.equal(out.output_tokens, verify_chain_greedy(padded, target,
                                                               verify_lens=lens).output_tokens)


def test_issue_example_from_predict_accepts_padding():
    candidates = torch.tensor([[0, 5, 6], [0, 7, -1]])
    predict = torch.tensor([[5, 6, 9], [7, 8, 3]])
    out = verify_chain_greedy_from_predict(candidates, predict, verify_lens=torch.tensor([3, 2]),
                                           vocab_size=100)
    assert out.output_tokens.tolist() == [[5, 6, 9], [7, 8, -1]]


def test_minus_one_inside_a_request_is_a_coded_error_on_cpu_and_never_accepted_unchecked():
    candidates, target, draft = _batch(7, b=2, n=4)
    candidates[1, 1] = -1
    params = SamplingParams.of(2, temperature=[0.0, 1.0])
    with pytest.raises(KernelInputError) as err:
        verify_chain_with_params(candidates, target, draft, params=params)
    assert err.value.code == "SR903"
    with pytest.raises(KernelInputError) as err:
        verify_chain_greedy_from_predict(candidates, target.argmax(-1), vocab_size=300)
    assert err.value.code == "SR903"
    for backend in ("torch", "triton"):
        for temperature in (0.0, 1.0):
            out = verify_chain_with_params(
                candidates, target, draft, params=SamplingParams.of(2, temperature=temperature),
                check_values=False, backend=backend, block_v=64,
            )
            assert out.accept_len[1] == 0 and out.output_tokens[1, 0] >= 0


# ---------------------------------------------------------------------------------------------
# The filtering rule: torch and Triton against the reference


def _rows(seed, r=10, vocab=100):
    gen = torch.Generator().manual_seed(seed)
    scores = 3 * torch.randn(r, vocab, generator=gen)
    scores[::3] = torch.round(scores[::3])  # ties at the cuts
    scores[1, :20] = float("-inf")
    temperature = torch.rand(r, generator=gen) * 2 + 0.2
    top_k = torch.randint(0, vocab + 1, (r,), generator=gen)
    top_k[::4] = 0
    top_k[5] = 1
    top_p = torch.rand(r, generator=gen).clamp_min(0.05)
    top_p[::5] = 1.0
    min_p = torch.rand(r, generator=gen) * 0.3
    min_p[::2] = 0.0
    return scores, temperature, top_k, top_p, min_p


@pytest.mark.parametrize("seed", [0, 1])
def test_filter_matches_reference(seed):
    scores, temperature, top_k, top_p, min_p = _rows(seed)
    z = scaled_scores(scores, temperature, probabilities=False)
    stats = row_stats(z, top_k, top_p, min_p)
    got = filtered_rows(scores, temperature, stats, min_p, probabilities=False)
    for r in range(scores.shape[0]):
        want = filtered_distribution(
            scores[r], temperature=float(temperature[r]), top_k=int(top_k[r]),
            top_p=float(top_p[r]), min_p=float(min_p[r]),
        )
        kept = want > 1e-30
        assert torch.equal(got[r] > 0, kept) or torch.allclose(got[r].double(), want, atol=1e-7)
        assert torch.allclose(got[r].double(), want, atol=1e-6), r


def test_filter_ties_keep_every_tied_token():
    scores = torch.tensor([[3.0, 1.0, 3.0, 1.0, 1.0, 0.0]])
    one = torch.ones(1)
    for top_k, kept in ((1, 2), (2, 2), (3, 5)):
        z = scaled_scores(scores, one, probabilities=False)
        stats = row_stats(z, torch.tensor([top_k]), one, torch.zeros(1))
        row = filtered_rows(scores, one, stats, torch.zeros(1), probabilities=False)
        assert int((row > 0).sum()) == kept


@pytest.mark.parametrize("probabilities", [False, True])
def test_triton_row_stats_equal_torch(probabilities):
    scores, temperature, top_k, top_p, min_p = _rows(2)
    source = torch.softmax(scores, -1) if probabilities else scores
    z = scaled_scores(source, temperature, probabilities=probabilities)
    keys = filter_keys(source, probabilities=probabilities)  # probabilities rank as p
    stats = row_stats(z, top_k, top_p, min_p, keys=keys, temperature=temperature)
    shift, threshold, norm = row_stats_triton(
        source, torch.arange(scores.shape[0]), temperature, top_k, top_p, min_p,
        probabilities=probabilities, block_v=32,
    )
    assert torch.allclose(shift, stats.shift, rtol=1e-6)
    assert torch.equal(threshold, stats.threshold)
    assert torch.allclose(norm, stats.norm, rtol=1e-5)


@pytest.mark.parametrize("probabilities", [False, True])
@pytest.mark.parametrize("with_draft", [False, True])
def test_triton_chain_with_params_equals_torch(probabilities, with_draft):
    candidates, target, draft = _batch(10, b=6, n=4, vocab=32)
    candidates[:, 1:] = torch.randint(0, 3, (6, 3), generator=torch.Generator().manual_seed(1))
    target[:, :, :3] += 2.5  # drafts of low ids: some acceptance
    if probabilities:
        target, draft = torch.softmax(target, -1), torch.softmax(draft, -1)
    params = SamplingParams.of(
        6, temperature=[0.0, 0.8, 1.2, 0.5, 2.0, 1.0], top_k=[0, 5, 0, 3, 0, 0],
        top_p=[1.0, 0.9, 0.8, 1.0, 0.95, 1.0], min_p=[0.0, 0.0, 0.05, 0.0, 0.1, 0.0],
        seed=[1, 2, 3, 4, 5, -1],
    )
    kwargs = dict(params=params, verify_lens=torch.tensor([4, 2, 1, 3, 4, 4]),
                  probabilities=probabilities, positions=torch.arange(6),
                  coins=torch.rand(6, 3, generator=torch.Generator().manual_seed(2)) * 0.5,
                  keys=torch.arange(6) + 2**40)
    a = verify_chain_with_params(candidates, target, draft if with_draft else None,
                                 backend="torch", **kwargs)
    t = verify_chain_with_params(candidates, target, draft if with_draft else None,
                                 backend="triton", block_v=16, **kwargs)
    assert torch.equal(a.output_tokens, t.output_tokens)
    assert torch.equal(a.accept_len, t.accept_len)
    assert len(set(a.accept_len.tolist())) >= 2


# ---------------------------------------------------------------------------------------------
# Bad parameters


@pytest.mark.parametrize(
    ("field", "value", "code"),
    [
        ("temperature", -0.5, "SR911"),
        ("temperature", float("nan"), "SR911"),
        ("temperature", float("inf"), "SR911"),
        ("top_p", 0.0, "SR913"),
        ("top_p", 1.5, "SR913"),
        ("top_p", float("nan"), "SR913"),
        ("top_k", -1, "SR912"),
        ("top_k", 301, "SR912"),
        ("min_p", -0.1, "SR914"),
        ("min_p", 1.01, "SR914"),
        ("min_p", float("inf"), "SR914"),
        ("seed", -2, "SR915"),
    ],
)
def test_bad_parameter_is_a_coded_error_on_cpu_and_a_flag_unchecked(field, value, code):
    candidates, target, draft = _batch(8, b=3, n=4, vocab=300)
    values = dict(temperature=[0.0, 1.0, 0.7], top_k=0, top_p=1.0, min_p=0.0, seed=[1, 2, 3])
    column = getattr(SamplingParams.of(3, **values), field).clone()
    column[1] = value
    params = attrs_evolve(SamplingParams.of(3, **values), **{field: column})
    with pytest.raises(KernelInputError) as err:
        verify_chain_with_params(candidates, target, draft, params=params)
    assert err.value.code == code
    assert "request(s) [1]" in str(err.value)
    backends = ("torch", "triton") if field in ("temperature", "top_k") else ("torch",)
    for backend in backends:
        out = verify_chain_with_params(candidates, target, draft, params=params,
                                       check_values=False, backend=backend, block_v=64)
        assert out.param_error.tolist() == [False, True, False]
        assert out.output_tokens[1].tolist() == [-1] * 4 and out.accept_len[1] == 0
        good = verify_chain_with_params(candidates, target, draft,
                                        params=SamplingParams.of(3, **values), backend=backend,
                                        block_v=64)
        assert torch.equal(out.output_tokens[[0, 2]], good.output_tokens[[0, 2]])


def attrs_evolve(params, **changes):
    import attrs

    return attrs.evolve(params, **changes)


def test_every_bad_parameter_is_reported_at_once():
    candidates, target, draft = _batch(8, b=3, n=4)
    params = SamplingParams.of(3, temperature=[-1.0, 1.0, 1.0], top_p=[1.0, 0.0, 1.0],
                               top_k=[0, 0, 999], min_p=[0.0, 0.0, 2.0])
    with pytest.raises(KernelInputError) as err:
        verify_chain_with_params(candidates, target, draft, params=params)
    assert set(err.value.codes) == {"SR911", "SR912", "SR913", "SR914"}


def test_parameter_batch_size_must_match():
    candidates, target, draft = _batch(8, b=3, n=4)
    with pytest.raises(KernelInputError) as err:
        verify_chain_with_params(candidates, target, draft,
                                 params=SamplingParams.of(4, temperature=1.0))
    assert err.value.code == "SR910"
    with pytest.raises(KernelInputError) as err:
        verify_chain_with_params(candidates, target, draft, params={"temperature": 1.0})
    assert err.value.code == "SR910"


# ---------------------------------------------------------------------------------------------
# The plan's verifiers take the parameters


def test_plan_verifiers_take_params():
    import specreg

    registry = specreg.Registry.load()
    candidates, target, draft = _batch(12, b=6, n=4, vocab=64)
    params = SamplingParams.of(6, temperature=[0.0, 0.7, 1.0, 0.0, 1.3, 0.9], top_k=[0, 5, 0, 0, 0, 3],
                               top_p=[1.0, 1.0, 0.8, 1.0, 1.0, 0.9], seed=[1, 2, 3, 4, 5, 6])
    want = verify_chain_with_params(candidates, target, draft, params=params)
    block = registry.resolve({"algorithm": "dspark", "num_draft_tokens": 4}).verifier
    got = block.verify_sampling_from_logits(candidates, target, draft, params=params)
    assert torch.equal(got.output_tokens, want.output_tokens)
    got = block.chain.verify_from_logits(candidates, target, draft, params=params)
    assert torch.equal(got.output_tokens, want.output_tokens)
    p, q = torch.softmax(target, -1), torch.softmax(draft, -1)
    from_probs = block.chain.verify_sampling(candidates, p, q, params=params)
    assert torch.equal(
        from_probs.output_tokens, verify_chain_with_params(
            candidates, p, q, params=params, probabilities=True).output_tokens
    )
    with pytest.raises(KernelInputError) as err:
        block.chain.verify_sampling(candidates, p, q, params=params, seed=3)
    assert err.value.code == "SR910"

    eagle = registry.resolve(
        {"algorithm": "eagle", "num_steps": 2, "topk": 2, "num_draft_tokens": 5}
    ).verifier
    from specreg.kernels.tree_build import build_tree

    parent_list = torch.tensor([[-1, 0, 1]]).repeat(2, 1)
    top = torch.tensor([[0, 1, 2, 3]]).repeat(2, 1)
    drafts = torch.randint(0, 64, (2, 4), generator=torch.Generator().manual_seed(0))
    tree = build_tree(torch.tensor([1, 2]), parent_list, top, drafts, torch.tensor([3, 4]),
                      topk=2, depth=2, num_verify_tokens=5)
    logits = torch.randn(2, 5, 64, generator=torch.Generator().manual_seed(1))
    tree_params = SamplingParams.of(2, temperature=[0.0, 0.8], top_p=0.9, seed=[7, 8])
    out = eagle.verify_from_logits(tree, logits, params=tree_params)
    greedy = eagle.verify_greedy(tree, logits)
    assert torch.equal(out.output_tokens[0], greedy.output_tokens[0])
    again = eagle.verify_sampling(tree, torch.softmax(logits, -1), params=tree_params)
    assert again.output_tokens.shape == out.output_tokens.shape


def test_flat_rows_take_the_binned_top_p_search():
    """A nucleus longer than the sorted prefix (TOP_P_PREFIX) is found by the mass bins."""
    from specreg.kernels.filtering.torch_impl import TOP_P_PREFIX

    gen = torch.Generator().manual_seed(5)
    scores = 0.05 * torch.randn(3, 2000, generator=gen)
    scores[2, ::7] = 0.0  # ties inside the cut bin
    one = torch.ones(3)
    top_k = torch.tensor([0, 0, 1500])
    top_p = torch.tensor([0.9, 0.5, 0.8])
    stats = row_stats(scaled_scores(scores, one, probabilities=False), top_k, top_p,
                      torch.zeros(3))
    got = filtered_rows(scores, one, stats, torch.zeros(3), probabilities=False)
    for r in range(3):
        want = filtered_distribution(scores[r], temperature=1.0, top_k=int(top_k[r]),
                                     top_p=float(top_p[r]))
        assert torch.equal(got[r] > 0, want > 0)
        assert int((want > 0).sum()) > TOP_P_PREFIX


_LARGE_OFFSET_SCRIPT = """
import os
os.environ["TRITON_INTERPRET"] = "1"
import torch
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.contract.sampling_params import SamplingParams
b, n, vocab = 3, 3, 64
stride_b = 2**30 + 1024  # fits int32, but 2 * stride_b does not
storage = torch.empty(stride_b * (b - 1) + n * vocab, dtype=torch.bfloat16)  # 4 GiB, untouched
logits = storage.as_strided((b, n, vocab), (stride_b, vocab, 1))
gen = torch.Generator().manual_seed(0)
for r in range(b):
    logits[r] = (3 * torch.randn(n, vocab, generator=gen)).to(torch.bfloat16)
candidates = torch.cat([torch.zeros(b, 1, dtype=torch.long), logits.float().argmax(-1)[:, :-1]], 1)
params = SamplingParams.of(b, temperature=[0.0, 0.9, 1.1], top_k=[0, 8, 0], top_p=[1.0, 0.9, 0.7],
                           seed=[1, 2, 3])
ref = verify_chain_with_params(candidates, logits, None, params=params, backend="torch")
got = verify_chain_with_params(candidates, logits, None, params=params, backend="triton",
                               block_v=16)
assert torch.equal(ref.output_tokens, got.output_tokens), (ref, got)
print("ok")
"""


def test_triton_params_row_offsets_past_int32():
    """Rows starting past element 2**31 are read correctly by the params kernel (64-bit
    offsets); a 4 GiB virtual buffer, a few KiB touched, in a subprocess."""
    import os
    import subprocess
    import sys

    done = subprocess.run(
        [sys.executable, "-c", _LARGE_OFFSET_SCRIPT], capture_output=True, text=True,
        timeout=300, env={**os.environ, "TRITON_INTERPRET": "1"},
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


_COMPILE_SCRIPT = """
import os
os.environ.pop("TRITON_INTERPRET", None)
import triton
from triton.backends.compiler import GPUTarget
from triton.compiler import ASTSource
from specreg.kernels.chain_params import triton_impl as chain_params
from specreg.kernels.filtering import triton_impl

target = GPUTarget("cuda", 90, 32)
sig = {"cand_ptr": "*i64", "stride_cb": "i32", "stride_cn": "i32",
       "p_ptr": "*bf16", "stride_pb": "i64", "stride_pn": "i32", "stride_pv": "i32",
       "q_ptr": "*bf16", "stride_qb": "i64", "stride_qn": "i32", "stride_qv": "i32",
       "coins_ptr": "*fp32", "stride_ub": "i32", "stride_un": "i32",
       "keys_ptr": "*i64", "positions_ptr": "*i64", "vlens_ptr": "*i64",
       "temp_ptr": "*fp32", "topk_ptr": "*i64", "topp_ptr": "*fp32", "minp_ptr": "*fp32",
       "invalid_ptr": "*i1", "accept_ptr": "*i32", "bonus_ptr": "*i64", "out_ptr": "*i64",
       "n": "i32", "vocab": "i32", "HAS_Q": "constexpr", "HAS_VLENS": "constexpr",
       "PROBS": "constexpr", "BLOCK_V": "constexpr", "BLOCK_N": "constexpr"}
sig["ORDER"] = "constexpr"
sig["INVARIANT"] = "constexpr"
for has_q, probs, order, invariant in (
    (False, False, 0, False), (False, True, 0, False), (True, False, 0, False),
    (True, True, 0, False), (True, False, 1, False), (True, True, 2, False),
    (False, False, 0, True), (False, True, 1, True),
):
    triton.compile(ASTSource(chain_params._chain_params_kernel, sig, constexprs={
        "HAS_Q": has_q, "HAS_VLENS": True, "PROBS": probs, "BLOCK_V": 2048,
        "BLOCK_N": 8, "ORDER": order, "INVARIANT": invariant}), target=target)
stats = {"flat_ptr": "*fp32", "stride_r": "i64", "stride_v": "i32", "index_ptr": "*i64",
         "temp_ptr": "*fp32", "k_ptr": "*i64", "p_ptr": "*fp32", "m_ptr": "*fp32",
         "shift_ptr": "*fp32", "threshold_ptr": "*fp32", "norm_ptr": "*fp32", "vocab": "i32",
         "PROBS": "constexpr", "BLOCK_V": "constexpr", "ORDER": "constexpr"}
for order in (0, 1, 2):  # the filter orders' codes: specreg, vllm, sglang
    for probs in (False, True):
        triton.compile(ASTSource(triton_impl._row_stats_kernel, stats, constexprs={
            "PROBS": probs, "BLOCK_V": 1024, "ORDER": order}), target=target)
rows = {"flat_ptr": "*fp32", "stride_r": "i64", "stride_v": "i32", "index_ptr": "*i64",
        "temp_ptr": "*fp32", "m_ptr": "*fp32", "shift_ptr": "*fp32", "threshold_ptr": "*fp32",
        "norm_ptr": "*fp32", "out_ptr": "*fp32", "vocab": "i32", "PROBS": "constexpr",
        "BLOCK_V": "constexpr"}
at = {"flat_ptr": "*bf16", "stride_r": "i64", "stride_v": "i32", "rows_ptr": "*i64",
      "tokens_ptr": "*i64", "temp_ptr": "*fp32", "m_ptr": "*fp32", "shift_ptr": "*fp32",
      "threshold_ptr": "*fp32", "norm_ptr": "*fp32", "out_ptr": "*fp32", "width": "i32",
      "PROBS": "constexpr", "BLOCK_W": "constexpr"}
for probs in (False, True):  # the rows and token values the Triton paths read
    triton.compile(ASTSource(triton_impl._filtered_rows_kernel, rows, constexprs={
        "PROBS": probs, "BLOCK_V": 1024}), target=target)
    triton.compile(ASTSource(triton_impl._log_probs_at_kernel, at, constexprs={
        "PROBS": probs, "BLOCK_W": 16}), target=target)
print("ok")
"""


def test_params_kernels_compile_for_sm90():
    """The params kernels lower to PTX for an H100/H200-class target (no GPU needed): catches
    typing errors the interpreter accepts (loop-carried types across the greedy/sampled
    branches, int64 promotions, constexpr branches)."""
    import os
    import subprocess
    import sys

    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run([sys.executable, "-c", _COMPILE_SCRIPT], capture_output=True,
                          text=True, timeout=300, env=env)
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]


# ---------------------------------------------------------------------------------------------
# Filter orders (specreg.contract.filter_order): each against its reference, Triton against
# torch, lossless chain verification in each order, and the order reaching the plan's verifier.

ORDERS = ("specreg", "vllm", "sglang")


@pytest.mark.parametrize("order", ORDERS)
@pytest.mark.parametrize("seed", [0, 3])
def test_filter_order_matches_its_reference(order, seed):
    scores, temperature, top_k, top_p, min_p = _rows(seed, r=16)
    min_p[1::4] = 0.4  # min-p and top-p together (the vllm order's case)
    rule = FILTER_RULES[order]
    stats = row_stats(scaled_scores(scores, temperature, probabilities=False), top_k, top_p,
                      min_p, rule)
    got = filtered_rows(scores, temperature, stats, min_p, probabilities=False)
    for r in range(scores.shape[0]):
        want = filtered_distribution(
            scores[r], temperature=float(temperature[r]), top_k=int(top_k[r]),
            top_p=float(top_p[r]), min_p=float(min_p[r]), order=order,
        )
        assert torch.equal(got[r] > 0, want > 0), r
        assert torch.allclose(got[r].double(), want, atol=1e-6), r


@pytest.mark.parametrize("order", ["vllm", "sglang"])
def test_filter_order_binned_top_p_search_matches_its_reference(order):
    """A nucleus longer than the sorted prefix takes the binned search in every order."""
    gen = torch.Generator().manual_seed(6)
    scores = 0.05 * torch.randn(3, 2000, generator=gen)
    one = torch.ones(3)
    top_k, top_p = torch.tensor([0, 1500, 1800]), torch.tensor([0.9, 0.8, 0.95])
    min_p = torch.tensor([0.0, 0.97, 0.95])  # min-p cuts inside the nucleus (vllm's base set)
    stats = row_stats(scaled_scores(scores, one, probabilities=False), top_k, top_p, min_p,
                      FILTER_RULES[order])
    got = filtered_rows(scores, one, stats, min_p, probabilities=False)
    for r in range(3):
        want = filtered_distribution(scores[r], temperature=1.0, top_k=int(top_k[r]),
                                     top_p=float(top_p[r]), min_p=float(min_p[r]), order=order)
        assert torch.equal(got[r] > 0, want > 0), r


@pytest.mark.parametrize("order", ["vllm", "sglang"])
def test_triton_row_stats_equal_torch_in_each_order(order):
    scores, temperature, top_k, top_p, min_p = _rows(4, r=8, vocab=48)
    min_p[1::2] = 0.3
    rule = FILTER_RULES[order]
    stats = row_stats(scaled_scores(scores, temperature, probabilities=False), top_k, top_p,
                      min_p, rule)
    shift, threshold, norm = row_stats_triton(
        scores, torch.arange(8), temperature, top_k, top_p, min_p, probabilities=False,
        block_v=16, rule=rule,
    )
    assert torch.equal(threshold, stats.threshold)
    assert torch.allclose(norm, stats.norm, rtol=1e-5)


@pytest.mark.parametrize("order", ["vllm", "sglang"])
def test_triton_chain_with_params_equals_torch_in_each_order(order):
    candidates, target, draft = _batch(11, b=4, n=3, vocab=24)
    candidates[:, 1:] = torch.randint(0, 3, (4, 2), generator=torch.Generator().manual_seed(1))
    target[:, :, :3] += 2.5
    params = SamplingParams.of(4, temperature=[0.0, 0.8, 1.2, 1.0], top_k=[0, 5, 0, 4],
                               top_p=[1.0, 0.7, 0.6, 0.8], min_p=[0.0, 0.3, 0.2, 0.1],
                               seed=[1, 2, 3, 4])
    kwargs = dict(params=params, filter_order=order,
                  coins=torch.rand(4, 2, generator=torch.Generator().manual_seed(2)) * 0.5,
                  keys=torch.arange(4) - 7, positions=torch.tensor([3, 0, 8, 1]))
    a = verify_chain_with_params(candidates, target, draft, backend="torch", **kwargs)
    t = verify_chain_with_params(candidates, target, draft, backend="triton", block_v=16,
                                 **kwargs)
    assert torch.equal(a.output_tokens, t.output_tokens)
    assert torch.equal(a.accept_len, t.accept_len)


def _log(probs: list[float]) -> list[float]:
    return torch.log(torch.tensor(probs)).tolist()


# Per order, a (target, draft, parameters) case whose kept set differs from specreg's default:
# vllm: min-p first shrinks the set top-p measures (specreg keeps {0, 1, 2}, vllm {0, 1});
# sglang: top-p over the whole distribution (specreg keeps {0, 1}, sglang {0, 1, 2}).
ORDER_CASES = {
    "vllm": (
        _logits(_log([0.3, 0.25, 0.2, 0.15, 0.09, 0.01])),
        _logits([0.0, 0.4, 1.5, 1.2, 0.3, -1.0]),
        dict(temperature=1.0, top_k=4, top_p=0.7, min_p=0.55),
    ),
    "sglang": (
        _logits(_log([0.3, 0.25, 0.2, 0.15, 0.09, 0.01])),
        _logits([1.5, -0.5, 0.2, 1.0, 0.9, 0.0]),
        dict(temperature=1.0, top_k=3, top_p=0.58),
    ),
}


def test_order_cases_differ_from_the_default_order():
    for order, (target_logits, _, params_kw) in ORDER_CASES.items():
        ours = _filtered_table(target_logits, **params_kw)[ANCHOR] > 0
        theirs = _filtered_table(target_logits, order=order, **params_kw)[ANCHOR] > 0
        assert not torch.equal(ours, theirs), order


def _order_first_two(order, verify_order, seed, gamma=3):
    """Drafts from q filtered in `order`; verification told `verify_order`."""
    target_logits, draft_logits, params_kw = ORDER_CASES[order]
    gen = torch.Generator().manual_seed(seed)
    q_table = _filtered_table(draft_logits, order=order, **params_kw)

    def step(anchors):
        candidates = _draft(anchors, q_table, gamma, gen)
        return verify_chain_with_params(
            candidates, target_logits[candidates], draft_logits[candidates[:, :-1]],
            params=SamplingParams.of(anchors.shape[0], **params_kw), generator=gen,
            filter_order=verify_order,
        ).output_tokens

    out = step(torch.full((SAMPLES,), ANCHOR, dtype=torch.long))
    first, second = out[:, 0].clone(), out[:, 1].clone()
    need = second < 0
    second[need] = step(first[need])[:, 0]
    p_table = _filtered_table(target_logits, order=order, **params_kw).double()
    joint = (p_table[ANCHOR][:, None] * p_table).ravel()
    return _pvalue(first, p_table[ANCHOR]), _pvalue(first * V + second, joint)


@pytest.mark.parametrize("order", sorted(ORDER_CASES))
def test_chain_is_lossless_in_each_filter_order_and_the_wrong_order_is_detected(order):
    seed = 700 + sorted(ORDER_CASES).index(order)
    p_first, p_joint = _order_first_two(order, order, seed)
    assert p_first > P_THRESHOLD and p_joint > P_THRESHOLD, (p_first, p_joint)
    # Negative control: the same drafts verified in specreg's default order.
    p_first, p_joint = _order_first_two(order, "specreg", seed)
    assert p_first < 1e-6 and p_joint < 1e-6, (p_first, p_joint)


def test_bad_filter_order_is_a_coded_error():
    candidates, target, draft = _batch(3, b=2, n=3, vocab=16)
    params = SamplingParams.of(2, temperature=1.0, top_p=0.9)
    with pytest.raises(KernelInputError) as err:
        verify_chain_with_params(candidates, target, draft, params=params, filter_order="vLLM")
    assert err.value.code == "SR130"
    with pytest.raises(ValueError) as err:
        SpecConfig(algorithm="eagle", filter_order="joint")
    assert err.value.codes == ("SR130",)


@pytest.mark.parametrize("order", [None, *ORDERS])
def test_the_plans_verifiers_filter_in_the_configs_order(order):
    registry = Registry.load()
    expected = order or "specreg"
    eagle = registry.resolve(SpecConfig(algorithm="eagle", filter_order=order))
    chain = registry.resolve(
        SpecConfig(algorithm="eagle", num_steps=3, topk=1, num_draft_tokens=4, filter_order=order)
    )
    assert eagle.verifier.filter_order == expected
    assert chain.verifier.filter_order == expected
    assert f"filter_order={expected}" in eagle.verifier.describe()
    assert eagle.config.to_dict().get("filter_order") == order
