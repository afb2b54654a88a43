"""Chain verification at its boundaries, torch and Triton (interpreter) against the plain
references: residuals without mass (the fallback to p), the strict acceptance test with a coin
exactly at p(x), and a -1 draft met by a -1 prediction without `vocab_size`.

Each input is built for its boundary: p one-hot (or within one float32 ulp of it) at a token
the coin rejects, q equal to p, a draft outside the support of both.
"""

import pytest
import torch

from specreg.kernels.chain import (
    verify_chain_greedy_from_predict,
    verify_chain_sampling,
    verify_chain_target_only,
)
from specreg.kernels.chain.reference import (
    verify_chain_greedy_from_predict_reference,
    verify_chain_sampling_reference,
)
from specreg.kernels.chain.types import ChainSamplingInputs
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.chain_params.reference import verify_chain_with_params_reference
from specreg.kernels.chain_params.types import ChainParamsInputs
from specreg.contract.sampling_params import SamplingParams
from tests.support.independent_race import RESIDUAL, SAMPLE, race

ALMOST_ONE = 1.0 - 2.0**-24  # the largest float32 below 1
BACKENDS = ["torch", "triton"]


def _same(got, want):
    assert torch.equal(got.accept_len, want.accept_len)
    assert torch.equal(got.output_tokens, want.output_tokens)


def _target_only_case():
    """Request 0: p(x) = ALMOST_ONE, every other token 0, and a coin of exactly p(x): the strict
    test rejects x, and p without x has no mass, so the emitted token is x itself (drawn from p).
    Request 1: the same row with a coin just below p(x): accepted, the bonus row is one-hot.
    Request 2: a one-hot row at 0 and x = 0 with coin 0.75 of a p(x) = 1: accepted."""
    vocab, n = 7, 3
    target = torch.zeros(3, n, vocab)
    target[:2, 0, 4] = ALMOST_ONE
    target[:2, 1, 5] = 1.0
    target[:2, 2, 6] = 1.0
    target[2, :, 0] = 1.0
    candidates = torch.tensor([[1, 4, 5], [1, 4, 5], [1, 0, 0]])
    coins = torch.tensor([[ALMOST_ONE, 0.0], [ALMOST_ONE - 2.0**-24, 0.0], [0.75, 0.75]])
    keys, positions = torch.tensor([999, 5, -25]), torch.tensor([0, 3, 2**40])
    return candidates, target, coins, keys, positions


def _stream(keys, positions=None):
    """The `keys=` and `positions=` keywords (positions 0 when None)."""
    positions = torch.zeros_like(keys) if positions is None else positions
    return {"keys": keys, "positions": positions}


@pytest.mark.parametrize("backend", BACKENDS)
def test_target_only_rejection_without_residual_mass_draws_from_p(backend):
    candidates, target, coins, keys, positions = _target_only_case()
    want = verify_chain_sampling_reference(ChainSamplingInputs(
        candidates=candidates, target_probs=target, draft_probs=None, coins=coins,
        **_stream(keys, positions),
    ))  # fmt: skip
    assert want.accept_len.tolist() == [0, 2, 2]
    assert want.output_tokens[0].tolist() == [4, -1, -1]  # x again: the only token p allows
    got = verify_chain_target_only(candidates, target, coins=coins, **_stream(keys, positions),
                                   backend=backend, block_v=16)  # fmt: skip
    _same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_classic_rejection_without_residual_mass_draws_from_p(backend):
    """q = p one-hot at 3 and the draft x = 1 outside both supports (q(x) = p(x) = 0): rejected,
    max(p - q, 0) is all zero, so the correction is drawn from p: token 3, never the first
    index or x. A second request has the same rows with x = 3: accepted."""
    vocab = 6
    target = torch.zeros(2, 2, vocab)
    target[:, :, 3] = 1.0
    draft = target[:, :1].clone()
    candidates = torch.tensor([[0, 1], [0, 3]])
    coins, keys = torch.tensor([[0.0], [0.5]]), torch.tensor([0, 999])
    want = verify_chain_sampling_reference(ChainSamplingInputs(
        candidates=candidates, target_probs=target, draft_probs=draft, coins=coins,
        **_stream(keys),
    ))  # fmt: skip
    assert want.output_tokens.tolist() == [[3, -1], [3, 3]]
    got = verify_chain_sampling(candidates, target, draft, coins=coins, keys=keys,
                                backend=backend, block_v=16)  # fmt: skip
    _same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_top_k_1_residual_without_mass_is_a_token_of_positive_probability(backend):
    """Target and draft share their scores under top_k = 1, so p = q = one-hot(argmax = 4), and
    the draft token (2) lies outside the kept set: p - q is all zero and the correction must be
    drawn from p (token 4). With a draft (classic rule) and without (target-only rule)."""
    vocab = 8
    row = torch.tensor([0.1, 0.5, 1.0, -1.0, 3.0, 0.0, 2.0, -2.0])
    target = torch.stack([row, row.roll(2)])[None].expand(2, 2, vocab).contiguous()
    draft = target[:, :1].clone()
    candidates = torch.tensor([[0, 2], [0, 4]])
    params = SamplingParams.of(2, temperature=0.7, top_k=1)
    coins, keys = torch.tensor([[0.0], [0.9]]), torch.tensor([0, 999])
    for q in (draft, None):
        want = verify_chain_with_params_reference(ChainParamsInputs(
            candidates=candidates, target=target, draft=q, params=params, coins=coins,
            **_stream(keys),
        ))  # fmt: skip
        assert want.output_tokens.tolist() == [[4, -1], [4, 6]]
        got = verify_chain_with_params(candidates, target, q, params=params, coins=coins,
                                       keys=keys, backend=backend, block_v=16)
        _same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_coin_exactly_at_p_over_q_rejects(backend):
    """coin * q(x) == p(x) exactly (dyadic values): the strict test rejects; one float32 ulp
    below it accepts."""
    vocab = 4
    target = torch.tensor([[0.25, 0.25, 0.5, 0.0], [0.0, 0.0, 0.0, 1.0]]).expand(2, 2, vocab)
    draft = torch.tensor([[0.0, 0.5, 0.5, 0.0]]).expand(2, 1, vocab).contiguous()
    candidates = torch.tensor([[0, 1], [0, 1]])
    coins = torch.tensor([[0.5], [0.5 - 2.0**-25]])
    keys = torch.tensor([3, 3])
    want = verify_chain_sampling_reference(ChainSamplingInputs(
        candidates=candidates, target_probs=target.contiguous(), draft_probs=draft,
        coins=coins, **_stream(keys),
    ))  # fmt: skip
    assert want.accept_len.tolist() == [0, 1]
    got = verify_chain_sampling(candidates, target.contiguous(), draft, coins=coins,
                                keys=keys, backend=backend, block_v=16)
    _same(got, want)


def test_a_minus_one_draft_never_matches_a_minus_one_prediction():
    """Without `vocab_size` nothing checks the ids: a -1 draft against a -1 prediction (padding
    on both sides) is still a mismatch, and the bonus is that prediction."""
    candidates = torch.tensor([[7, -1, 3], [7, 2, -1], [7, 2, 3]])
    predict = torch.tensor([[-1, 3, 9], [2, -1, 5], [2, 3, 8]])
    want = verify_chain_greedy_from_predict_reference(candidates, predict, verify_lens=None)
    assert want.accept_len.tolist() == [0, 1, 2]
    for check_values in (None, False):
        got = verify_chain_greedy_from_predict(candidates, predict, check_values=check_values)
        _same(got, want)
        assert torch.equal(got.bonus, want.bonus)


def _dense_cases():
    """(candidates, target, draft or None, coins, stream keywords, verify_lens): the boundary
    cases above, a ragged random batch with and without a draft, and chains of one position (no
    drafts: the bonus row only)."""
    candidates, target, coins, keys, positions = _target_only_case()
    yield candidates, target, None, coins, _stream(keys, positions), None
    flat = torch.full((3, 3, 5), 0.2)  # out-of-range drafts on a flat row, coins of 0
    yield (torch.tensor([[0, -1, 2], [0, 5, 2], [0, 1, 5]]), flat, None, torch.zeros(3, 2),
           _stream(torch.tensor([1, 5, 9])), None)  # fmt: skip
    vocab = 6
    zero = torch.zeros(2, 2, vocab)
    zero[:, :, 3] = 1.0
    yield (torch.tensor([[0, 1], [0, 3]]), zero, zero[:, :1].clone(), torch.tensor([[0.0], [0.5]]),
           _stream(torch.tensor([0, 999])), None)  # fmt: skip
    gen = torch.Generator().manual_seed(3)
    b, n, vocab = 6, 4, 9
    target = torch.softmax(2 * torch.randn(b, n, vocab, generator=gen), -1)
    draft = torch.softmax(2 * torch.randn(b, n - 1, vocab, generator=gen), -1)
    candidates = torch.randint(0, vocab, (b, n), generator=gen)
    candidates[0, 2] = -1  # an invalid draft id stops the chain
    coins = torch.rand(b, n - 1, generator=gen) * 0.6
    stream = _stream(torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
                     torch.randint(0, 2**20, (b,), generator=gen))
    lens = torch.tensor([4, 1, 2, 3, 4, 2])
    for q in (draft, None):
        yield candidates, target, q, coins, stream, lens
        yield candidates[:, :1], target[:, :1], None if q is None else q[:, :0], coins[:, :0], \
            stream, None


def test_the_accelerator_emit_on_cpu_tensors_equals_the_reference(monkeypatch):
    """The correction / bonus draw of accelerators (`_one_span`: every request's row at once, no
    host synchronisation per chunk) never runs on a CPU tensor; swapped in for the CPU chunks it
    must give the reference's tokens on every case above, the residuals without mass included."""
    from specreg.kernels.chain import torch_impl

    monkeypatch.setattr(torch_impl, "_row_spans", torch_impl._one_span)
    for candidates, target, draft, coins, stream, lens in _dense_cases():
        inputs = ChainSamplingInputs(candidates=candidates, target_probs=target,
                                     draft_probs=draft, coins=coins, **stream,
                                     verify_lens=lens)  # fmt: skip
        want = verify_chain_sampling_reference(inputs)
        got = torch_impl.verify_chain_sampling_torch(inputs)
        _same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unchecked_out_of_range_drafts_are_never_accepted(backend):
    """With `check_values=False` (the GPU default) a draft id of -1 or of `vocab` reaches the
    kernel: never accepted, even with a coin of 0 and p, q > 0 at the ids it would clamp to
    (0 and vocab - 1), and never read out of bounds; the correction comes from that row, which
    (target-only rule) excludes no token: the keys are chosen so that the corrections of the
    -1 and `vocab` drafts are the ids they would clamp to, 0 and vocab - 1 (by the independent
    race). A fourth request accepts everything: its bonus on a flat row is token 0, excluded by
    nothing either."""
    vocab = 5
    target = torch.full((4, 3, vocab), 1.0 / vocab)
    draft = torch.full((4, 2, vocab), 1.0 / vocab)
    candidates = torch.tensor([[0, -1, 2], [0, vocab, 2], [0, 1, vocab], [0, 1, 2]])
    coins, keys = torch.zeros(4, 2), torch.tensor([14, 1, 7, 16])
    flat = [1.0 / vocab] * vocab
    drawn = [race(flat, 14, RESIDUAL, 0), race(flat, 1, RESIDUAL, 0), race(flat, 7, RESIDUAL, 1),
             race(flat, 16, SAMPLE, 2)]
    assert drawn[0] == 0 and drawn[1] == vocab - 1 and drawn[3] == 0
    for q in (draft, None):
        want = verify_chain_sampling_reference(ChainSamplingInputs(
            candidates=candidates, target_probs=target, draft_probs=q, coins=coins,
            **_stream(keys),
        ))  # fmt: skip
        assert want.accept_len.tolist() == [0, 0, 1, 2]
        assert want.output_tokens[:, -1].tolist()[::3] == [-1, 0]
        assert want.bonus.tolist() == drawn
        got = verify_chain_sampling(candidates, target, q, coins=coins, keys=keys,
                                    check_values=False, backend=backend, block_v=16)
        _same(got, want)


@pytest.mark.parametrize("backend", BACKENDS)
def test_unchecked_out_of_range_drafts_with_sampling_params_are_never_accepted(backend):
    """`verify_chain_with_params` with `check_values=False`: draft ids -1 and `vocab` are never
    accepted (coins of 0, a flat target) and never read out of bounds; and a chain of one
    position (no drafts) with a draft tensor of no rows."""
    vocab = 5
    target = torch.zeros(4, 3, vocab)
    draft = torch.zeros(4, 2, vocab)
    candidates = torch.tensor([[0, -1, 2], [0, vocab, 2], [0, 1, vocab], [0, 0, 2]])
    params = SamplingParams.of(4, temperature=[1.0, 0.7, 1.3, 1.0], top_p=[1.0, 0.9, 1.0, 1.0])
    # request 3: draft token 0 with a coin of .5 > p(0) = .2 is rejected under the target-only
    # rule, and the correction skips the excluded token 0: its key (14) races token 0 first on
    # the whole flat row (independent race), so the correction is the race's runner-up
    coins, keys = torch.zeros(4, 2), torch.tensor([1, 5, 9, 14])
    coins[3, 0] = 0.5
    flat = [1.0 / vocab] * vocab
    assert race(flat, 14, RESIDUAL, 0) == 0
    runner_up = race([0.0] + flat[1:], 14, RESIDUAL, 0)
    for c, t, q, k in ((candidates, target, draft, coins), (candidates, target, None, coins),
                       (candidates[:, :1], target[:, :1], draft[:, :0], coins[:, :0])):
        want = verify_chain_with_params_reference(ChainParamsInputs(
            candidates=c, target=t, draft=q, params=params, coins=k, **_stream(keys),
        ))  # fmt: skip
        got = verify_chain_with_params(c, t, q, params=params, coins=k, keys=keys,
                                       check_values=False, backend=backend, block_v=16)
        _same(got, want)
        if c.shape[1] == 3:
            assert want.accept_len.tolist()[:3] == [0, 0, 1]
        if q is None and c.shape[1] == 3:
            assert want.output_tokens[3, 0] == runner_up != 0


@pytest.mark.parametrize("backend", BACKENDS)
def test_a_bonus_after_every_draft_accepted_may_be_the_last_token_without_a_draft(backend):
    """Target-only rule with sampling params: a request that accepts every draft (and one with
    no draft, a chain of one position) draws its bonus from p, excluding no token: here half
    of p's mass lies on the last token, vocab - 1, and the keys are chosen so that the bonus
    race (SAMPLE role at absolute position 1, by the independent race) picks it. Excluding
    the position's token -1 (no token) must not strike the last vocab entry by wrapping around."""
    vocab = 6
    target = torch.zeros(2, 2, vocab)
    target[:, 0, 2] = 1.0  # the draft 2 of request 0 is accepted (p(2) = 1 > coin 0)
    target[:, 1, 0] = target[:, 1, vocab - 1] = 0.5
    candidates = torch.tensor([[0, 2], [0, 2]])
    params = SamplingParams.of(2, temperature=1.0)
    coins, keys = torch.zeros(2, 1), torch.tensor([1, 2])
    half = [0.5] + [0.0] * (vocab - 2) + [0.5]
    assert [race(half, key, SAMPLE, 1) for key in (1, 2)] == [vocab - 1, vocab - 1]
    # the one-position chain starts at position 1, where the two-position one emits its bonus
    for c, t, k, start in ((candidates, target, coins, 0),
                           (candidates[:, :1], target[:, 1:], coins[:, :0], 1)):
        stream = _stream(keys, torch.full_like(keys, start))
        want = verify_chain_with_params_reference(ChainParamsInputs(
            candidates=c, target=t, draft=None, params=params, coins=k, **stream,
            probabilities=True,
        ))  # fmt: skip
        assert want.output_tokens[:, -1].tolist() == [vocab - 1, vocab - 1]
        got = verify_chain_with_params(c, t, None, params=params, coins=k, **stream,
                                       probabilities=True, backend=backend,
                                       block_v=16)  # fmt: skip
        _same(got, want)


def test_the_accelerator_greedy_walk_on_cpu_tensors_equals_the_reference(monkeypatch):
    """Greedy chain verification on accelerators (`_verify_chain_greedy_batched`: one argmax
    over every row) never runs on a CPU tensor; swapped in for the CPU walk it must give the
    reference's tokens: ragged caps, a mismatch at every position, ties (the first index wins),
    a -1 draft, and a chain of one position."""
    from specreg.kernels.chain import torch_impl
    from specreg.kernels.chain.reference import verify_chain_greedy_reference

    monkeypatch.setattr(torch_impl, "_verify_chain_greedy_progressive",
                        torch_impl._verify_chain_greedy_batched)  # fmt: skip
    gen = torch.Generator().manual_seed(5)
    b, n, vocab = 6, 4, 9
    logits = torch.randn(b, n, vocab, generator=gen)
    logits[1, 2, 3] = logits[1, 2, 7] = logits[1, 2].max() + 1.0  # a tie: 3 wins
    predict = logits.argmax(-1)
    candidates = torch.cat([torch.zeros(b, 1, dtype=torch.int64), predict[:, :-1]], 1)
    candidates[2, 2] = (predict[2, 1] + 1) % vocab  # a mismatch after one accepted draft
    candidates[3, 1] = -1
    candidates[4, 1] = (predict[4, 0] + 1) % vocab
    lens = torch.tensor([4, 4, 4, 3, 2, 1])
    for c, t, v in ((candidates, logits, lens), (candidates, logits, None),
                    (candidates[:, :1], logits[:, :1], None)):
        want = verify_chain_greedy_reference(c, t, verify_lens=v)
        got = torch_impl.verify_chain_greedy_torch(c, t, verify_lens=v)
        _same(got, want)
        assert torch.equal(got.bonus, want.bonus)
    assert want.accept_len.tolist() == [0] * b
    want = verify_chain_greedy_reference(candidates, logits, verify_lens=lens)
    assert want.accept_len.tolist() == [3, 3, 1, 0, 0, 0]
    assert want.output_tokens[1, 2] == 3


@pytest.mark.parametrize("backend", BACKENDS)
def test_an_unchecked_minus_one_draft_excludes_no_token_from_the_correction(backend):
    """Target-only rule with sampling params and `check_values=False`: a draft id of -1 is
    rejected, and the correction is drawn from p without excluding any token (there is no
    token -1), here the last one, vocab - 1, which holds half of p's mass (the key is chosen
    so that the independent race draws it)."""
    vocab = 6
    target = torch.zeros(1, 2, vocab)
    target[:, 0, 0] = target[:, 0, vocab - 1] = 0.5
    candidates = torch.tensor([[0, -1]])
    params = SamplingParams.of(1, temperature=1.0)
    coins, keys = torch.zeros(1, 1), torch.tensor([4])
    assert race([0.5] + [0.0] * (vocab - 2) + [0.5], 4, RESIDUAL, 0) == vocab - 1
    want = verify_chain_with_params_reference(ChainParamsInputs(
        candidates=candidates, target=target, draft=None, params=params, coins=coins,
        **_stream(keys), probabilities=True,
    ))  # fmt: skip
    assert want.output_tokens.tolist() == [[vocab - 1, -1]]
    got = verify_chain_with_params(candidates, target, None, params=params, coins=coins,
                                   keys=keys, probabilities=True,
                                   check_values=False, backend=backend, block_v=16)
    _same(got, want)
