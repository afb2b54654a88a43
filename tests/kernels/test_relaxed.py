"""The lossy acceptance rules (specreg.kernels.relaxed): torch and Triton (interpreter) equal the
per-row reference at fixed seeds; the defaults are the lossless verifier bit for bit; thresholds
and typical acceptance move acceptance in the documented direction; thresholds are NOT lossless
(a chi-square that rejects, beside a lossless control that does not); greedy stays exact;
synthetic acceptance follows its configured length exactly and its rates in distribution."""

import pytest
import torch

from specreg.contract.acceptance_rules import AcceptanceRule
from specreg.step.chain_verifier import ChainVerifier
from specreg.kernels.chain import verify_chain_sampling
from specreg.kernels.chain.types import ChainSamplingInputs
from specreg.kernels.relaxed import RuleParams, verify_chain_relaxed, verify_chain_synthetic_greedy
from specreg.kernels.relaxed.reference import (
    verify_chain_relaxed_reference,
    verify_chain_synthetic_greedy_reference,
)
from specreg.kernels.relaxed.types import SYNTHETIC, THRESHOLDS, TYPICAL
from specreg.kernels.sampling import uniform_coins
from specreg.testing.lossless import chi_square_p_value
from tests.support.independent_race import accept_uniform

RULES = (
    RuleParams(mode=THRESHOLDS, threshold_single=0.3, threshold_acc=0.5),
    RuleParams(mode=THRESHOLDS, threshold_single=1.0, threshold_acc=0.2),
    RuleParams(mode=TYPICAL, posterior_threshold=0.09, posterior_alpha=0.3),
    RuleParams(mode=TYPICAL, posterior_threshold=0.5, posterior_alpha=2.0),
    RuleParams(mode=SYNTHETIC, rates=(0.9, 0.7, 0.5, 0.2)),
    RuleParams.of(AcceptanceRule(synthetic_length=2.5)),
)


def _case(seed, b=12, n=5, vocab=300):
    gen = torch.Generator().manual_seed(seed)
    p = torch.softmax(2 * torch.randn(b, n, vocab, generator=gen), -1)
    q = torch.softmax(2 * torch.randn(b, n - 1, vocab, generator=gen), -1)
    q[..., :8] += 0.5
    q = q / q.sum(-1, keepdim=True)
    p[..., :8] += 0.3 * q[..., :1, :8]
    p = p / p.sum(-1, keepdim=True)
    candidates = torch.randint(0, 8, (b, n), generator=gen)
    coins = uniform_coins((b, n - 1), device="cpu", seed=seed, offsets=torch.arange(b))
    stream = {"keys": torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
              "positions": torch.randint(0, 2**20, (b,), generator=gen)}
    return candidates, p, q, coins, stream


def _same(a, b):
    assert torch.equal(a.accept_len, b.accept_len)
    assert torch.equal(a.bonus, b.bonus)
    assert torch.equal(a.output_tokens, b.output_tokens)


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_relaxed_triton_and_torch_equal_the_reference(backend):
    b = 12 if backend == "torch" else 6  # the interpreter runs each program in Python
    lens = torch.tensor([5, 2, 1, 4, 3, 5, 5, 2, 1, 5, 4, 3][:b])
    accepted = set()
    for seed in range(2 if backend == "torch" else 1):
        candidates, p, q, coins, stream = _case(seed, b=b)
        for rule in RULES:
            for draft, verify_lens in ((q, None), (q, lens), (None, lens)):
                got = verify_chain_relaxed(
                    candidates, p, draft, rule=rule, coins=coins, **stream,
                    verify_lens=verify_lens, backend=backend, block_v=128,
                )
                want = verify_chain_relaxed_reference(ChainSamplingInputs(
                    candidates=candidates, target_probs=p, draft_probs=draft, coins=coins,
                    **stream, verify_lens=verify_lens), rule)
                _same(got, want)
                accepted |= set(got.accept_len.tolist())
    assert {0, 1, 2, 4} <= accepted  # rejections, partial runs and full runs were exercised


def test_synthetic_greedy_equals_the_reference():
    candidates, p, _, coins, _ = _case(3)
    logits = torch.log(p)
    for rule in RULES[4:]:
        got = verify_chain_synthetic_greedy(candidates, logits, rule=rule, coins=coins[:, 0])
        want = verify_chain_synthetic_greedy_reference(candidates, logits, coins[:, 0], rule, None)
        _same(got, want)


def test_synthetic_coins_default_to_the_first_drafts_acceptance_uniform():
    """Without coins, a request's synthetic coin is the stream's acceptance uniform of its first
    draft at its position (rebuilt by the independent stream); a chain without drafts accepts
    nothing. Bad caller coins are coded errors."""
    from specreg.errors import KernelInputError

    candidates, p, _, _, stream = _case(4)
    logits = torch.log(p)
    keys, positions = stream["keys"], stream["positions"]
    first = torch.tensor([accept_uniform(int(k), int(t), int(x)) for k, t, x in
                          zip(keys, positions, candidates[:, 1], strict=True)])
    for rule in RULES[4:]:
        got = verify_chain_synthetic_greedy(candidates, logits, rule=rule, **stream)
        want = verify_chain_synthetic_greedy_reference(candidates, logits, first, rule, None)
        _same(got, want)
        alone = verify_chain_synthetic_greedy(candidates[:, :1], logits[:, :1], rule=rule,
                                              **stream)
        assert alone.accept_len.tolist() == [0] * candidates.shape[0]
    b = candidates.shape[0]
    for bad, code in ((torch.full((b,), 1.5), "SR904"), (torch.zeros(b, 1), "SR900"),
                      (torch.zeros(b, dtype=torch.long), "SR901")):
        with pytest.raises(KernelInputError) as err:
            verify_chain_synthetic_greedy(candidates, logits, rule=RULES[4], coins=bad)
        assert err.value.code == code


def test_synthetic_greedy_rejects_negative_positions():
    from specreg.errors import KernelInputError

    candidates, p, _, _, _ = _case(4)
    with pytest.raises(KernelInputError) as err:
        verify_chain_synthetic_greedy(candidates, torch.log(p), rule=RULES[4],
                                      positions=torch.full((candidates.shape[0],), -1))
    assert err.value.code == "SR904"


def test_lossless_defaults_are_the_lossless_verifier_bit_for_bit():
    candidates, p, q, coins, stream = _case(5)
    plain = ChainVerifier(5)
    defaults = ChainVerifier(5, acceptance=AcceptanceRule())
    named = ChainVerifier(5, acceptance=AcceptanceRule(threshold_single=1.0, threshold_acc=1.0))
    assert not defaults.lossy and not named.lossy
    for draft in (q, None):
        for given in (coins, None):  # the caller's coins, and the stream's
            want = plain.verify_sampling(candidates, p, draft, coins=given, **stream)
            for verifier in (defaults, named):
                _same(verifier.verify_sampling(candidates, p, draft, coins=given, **stream),
                      want)
    # and the relaxed kernel itself degenerates to the lossless rule at (1, 1)
    for backend in ("torch", "triton"):
        for draft in (q, None):
            _same(verify_chain_relaxed(candidates, p, draft, coins=coins, **stream,
                                       rule=RuleParams(mode=THRESHOLDS), backend=backend),
                  verify_chain_sampling(candidates, p, draft, coins=coins, **stream))
        _same(verify_chain_relaxed(candidates, p, q, **stream, rule=RuleParams(mode=THRESHOLDS),
                                   backend=backend),
              verify_chain_sampling(candidates, p, q, **stream))


def test_thresholds_and_typical_move_acceptance_the_documented_way():
    candidates, p, q, coins, stream = _case(7, b=64)
    base = verify_chain_sampling(candidates, p, q, coins=coins, **stream).accept_len
    looser = verify_chain_relaxed(candidates, p, q, coins=coins, **stream,
                                  rule=RuleParams(mode=THRESHOLDS, threshold_acc=0.3)).accept_len
    single = verify_chain_relaxed(candidates, p, q, coins=coins, **stream,
                                  rule=RuleParams(mode=THRESHOLDS, threshold_single=0.05)).accept_len
    assert bool((looser >= base).all()) and int(looser.sum()) > int(base.sum())
    assert bool((single >= base).all()) and int(single.sum()) > int(base.sum())
    strict, loose = (
        verify_chain_relaxed(candidates, p, None, coins=coins, **stream,
                             rule=RuleParams(mode=TYPICAL, posterior_threshold=t,
                                             posterior_alpha=a)).accept_len
        for t, a in ((0.5, 10.0), (0.001, 0.001))
    )
    assert bool((loose >= strict).all()) and int(loose.sum()) > int(strict.sum())


def _first_tokens(rule, draft_row, p_row, samples, seed):
    """The first emitted token of a one-draft chain, `samples` times (drafts drawn from q)."""
    gen = torch.Generator().manual_seed(seed)
    x = torch.multinomial(draft_row, samples, replacement=True, generator=gen)
    candidates = torch.stack([torch.zeros_like(x), x], 1)
    p = p_row.expand(samples, 2, -1).contiguous()
    q = draft_row.expand(samples, 1, -1).contiguous()
    kwargs = dict(coins=torch.rand(samples, 1, generator=gen),
                  keys=torch.randint(-(2**63), 2**63 - 1, (samples,), generator=gen))
    if rule is None:
        out = verify_chain_sampling(candidates, p, q, **kwargs)
    else:
        out = verify_chain_relaxed(candidates, p, q, rule=rule, **kwargs)
    return torch.bincount(out.output_tokens[:, 0], minlength=p_row.shape[0])


def test_thresholds_are_lossy_by_chi_square_beside_a_lossless_control():
    p_row = torch.tensor([0.5, 0.25, 0.15, 0.07, 0.03])
    q_row = torch.tensor([0.05, 0.1, 0.15, 0.3, 0.4])  # the draft favours unlikely tokens
    samples = 20000
    control = chi_square_p_value(_first_tokens(None, q_row, p_row, samples, 11), p_row)
    relaxed = chi_square_p_value(
        _first_tokens(RuleParams(mode=THRESHOLDS, threshold_acc=0.5), q_row, p_row, samples, 11),
        p_row,
    )
    typical = chi_square_p_value(
        _first_tokens(RuleParams(mode=TYPICAL, posterior_threshold=0.05, posterior_alpha=0.3),
                      q_row, p_row, samples, 11), p_row,
    )
    assert control > 1e-3, control  # the lossless rule emits p
    assert relaxed < 1e-6, relaxed  # the relaxed rule does not: lossy, as documented
    assert typical < 1e-6, typical


def test_greedy_stays_exact_under_thresholds_and_typical():
    candidates, p, _, _, _ = _case(9)
    logits = torch.log(p)
    candidates[:, 1:3] = logits[:, :2].argmax(-1)  # some matches
    want = ChainVerifier(5).verify_greedy(candidates, logits)
    for rule in (AcceptanceRule(threshold_acc=0.2), AcceptanceRule(posterior_threshold=0.01)):
        verifier = ChainVerifier(5, acceptance=rule)
        assert verifier.lossy
        _same(verifier.verify_greedy(candidates, logits), want)


def test_synthetic_length_is_exact_and_capped_by_verify_lens():
    candidates, p, q, _, _ = _case(13, b=32)
    lens = torch.randint(1, 6, (32,), generator=torch.Generator().manual_seed(1))
    for length in (1, 3, 5):
        verifier = ChainVerifier(5, acceptance=AcceptanceRule(synthetic_length=length))
        keys = torch.arange(32) + 4
        for out in (verifier.verify_sampling(candidates, p, q, keys=keys),
                    verifier.verify_sampling(candidates, p, None, keys=keys),
                    verifier.verify_greedy(candidates, torch.log(p), keys=keys)):
            assert out.num_accepted.tolist() == [length - 1] * 32
        ragged = verifier.verify_sampling(candidates, p, None, verify_lens=lens, keys=keys)
        assert ragged.num_accepted.tolist() == torch.clamp(lens - 1, max=length - 1).tolist()
        lengths = verifier.verify_greedy(candidates, torch.log(p), draft_lengths=lens - 1,
                                         keys=keys)
        assert lengths.num_accepted.tolist() == torch.clamp(lens - 1, max=length - 1).tolist()


def test_synthetic_rates_follow_their_distribution_with_a_negative_control():
    rates = (0.8, 0.6, 0.3, 0.1)
    b = 20000
    candidates = torch.zeros(b, 5, dtype=torch.int64)
    p = torch.full((b, 5, 4), 0.25)
    verifier = ChainVerifier(5, acceptance=AcceptanceRule(synthetic_rates=rates))
    counts = torch.bincount(verifier.verify_sampling(
        candidates, p, None, generator=torch.Generator().manual_seed(17)).num_accepted.long(),
        minlength=5)
    marginal = torch.tensor((1.0, *rates, 0.0))
    expected = marginal[:-1] - marginal[1:]  # P(accepted = k) = rate[k-1] - rate[k]
    assert chi_square_p_value(counts, expected) > 1e-3
    geometric = torch.tensor([0.2, 0.16, 0.128, 0.1024, 0.4096])  # independent 0.8 per draft
    assert chi_square_p_value(counts, geometric) < 1e-6  # the check can fail
    # a fractional length: floor or ceil, Bernoulli in the fraction (binomial count)
    frac = ChainVerifier(5, acceptance=AcceptanceRule(synthetic_length=2.25)).verify_sampling(
        candidates, p, None, generator=torch.Generator().manual_seed(3)).num_accepted
    assert set(frac.tolist()) == {1, 2}
    ones = int((frac == 2).sum())
    assert abs(ones - 0.25 * b) < 4 * (b * 0.25 * 0.75) ** 0.5


def test_sglang_multinomial_length_follows_its_distribution():
    """SGLang's SGLANG_SIMULATE_ACC_METHOD=multinomial: round(Normal(L, 1)) clamped to
    [1, gamma + 1] emitted tokens, in distribution (chi-square), beside match-expected's."""
    import math

    b, mean = 20000, 2.6
    candidates = torch.zeros(b, 5, dtype=torch.int64)
    p = torch.full((b, 5, 4), 0.25)
    rule = AcceptanceRule(synthetic_length=mean, synthetic_method="multinomial")
    counts = torch.bincount(ChainVerifier(5, acceptance=rule).verify_sampling(
        candidates, p, None, generator=torch.Generator().manual_seed(23)).num_accepted.long(),
        minlength=5)
    phi = [0.5 * math.erfc(-(k + 0.5 - mean) / math.sqrt(2)) for k in range(1, 5)]  # P(N < k+.5)
    cdf = torch.tensor([*phi, 1.0], dtype=torch.float64)
    expected = torch.cat([cdf[:1], cdf[1:] - cdf[:-1]])  # P(emitted = 1..5)
    assert chi_square_p_value(counts, expected) > 1e-3
    matched = torch.tensor([0.0, 0.4, 0.6, 0.0, 0.0])  # match-expected's floor/ceil law
    assert chi_square_p_value(counts, matched) < 1e-6
