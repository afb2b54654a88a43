"""Per-request draft lengths on chains (`ChainVerifier`, `draft_lengths=`): request r verifies its
first draft_lengths[r] drafts, 0 = one plain sample from the anchor's row.

Oracles: the plain per-request rules of `specreg.kernels.chain.reference` with each request's
limit, and the exact target for losslessness: chi-square at fixed seeds over adversarial
(p, q) pairs with lengths 0, 1 and gamma mixed in one batch, each length group on its own, with
a negative control (opting out by drawing from the residual of the first draft) that fails.
"""

import pytest
import torch
from tests.kernels.test_chain_sampling import CASES, P_THRESHOLD, V, _check_lossless, _draft, _pvalue

from specreg.step.chain_verifier import ChainVerifier
from specreg.kernels.chain.reference import (
    emit_reference,
    verify_chain_greedy_reference,
    verify_chain_sampling_reference,
)
from specreg.kernels.chain.types import ChainSamplingInputs
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.contract.sampling_params import SamplingParams

GAMMA = 3
SAMPLES = 9000  # 3000 per draft length
LENGTHS = (0, 1, GAMMA)


def _batch(b, seed):
    gen = torch.Generator().manual_seed(seed)
    candidates = torch.randint(0, 4, (b, GAMMA + 1), generator=gen)
    logits = torch.randn(b, GAMMA + 1, 8, generator=gen)
    # the row before each draft mostly favours it: long rows accept deep
    nxt = torch.cat([candidates[:, 1:], candidates[:, :1]], 1)
    logits += 5.0 * (torch.rand(b, GAMMA + 1, generator=gen) < 0.8)[:, :, None] * (
        torch.nn.functional.one_hot(nxt, 8)
    )
    lengths = torch.tensor([LENGTHS[r % 3] for r in range(b)])
    return candidates, logits, lengths, gen


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_greedy_caps_each_request_at_its_length(backend):
    candidates, logits, lengths, _ = _batch(9, 0)
    out = ChainVerifier(GAMMA + 1, backend=backend).verify_greedy(
        candidates, logits, draft_lengths=lengths
    )
    ref = verify_chain_greedy_reference(candidates, logits, verify_lens=lengths + 1)
    assert torch.equal(out.num_accepted, ref.accept_len)
    assert torch.equal(out.output_tokens, ref.output_tokens)
    assert torch.equal(out.bonus, ref.bonus)
    optout = lengths == 0
    assert (out.num_accepted[optout] == 0).all()
    assert torch.equal(out.bonus[optout], logits[optout, 0].argmax(-1))  # plain greedy
    assert int(out.num_accepted[lengths == GAMMA].max()) > 1  # not vacuous


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("with_q", [True, False])
def test_sampling_caps_each_request_at_its_length(backend, with_q):
    candidates, logits, lengths, gen = _batch(9, 1)
    p = torch.softmax(logits, -1)
    q = torch.softmax(logits[:, :-1] + torch.randn(9, GAMMA, 8, generator=gen), -1)
    q = q if with_q else None
    coins = torch.rand(9, GAMMA, generator=gen)
    keys = torch.randint(-(2**63), 2**63 - 1, (9,), generator=gen)
    positions = torch.randint(0, 1000, (9,), generator=gen)
    out = ChainVerifier(GAMMA + 1, backend=backend).verify_sampling(
        candidates, p, q, coins=coins, keys=keys, positions=positions,
        draft_lengths=lengths.tolist(),
    )
    ref = verify_chain_sampling_reference(ChainSamplingInputs(
        candidates=candidates, target_probs=p, draft_probs=q, coins=coins, keys=keys,
        positions=positions, verify_lens=lengths + 1,
    ))
    assert torch.equal(out.output_tokens, ref.output_tokens)
    assert (out.num_accepted.long() <= lengths).all()


def _mixed_pairs(P, Q, seed, *, control=False):
    """The first two emitted tokens of SAMPLES requests drafting GAMMA tokens from Q, verified
    with lengths 0, 1, GAMMA in turn (a second step for requests that emitted one token)."""
    gen = torch.Generator().manual_seed(seed)
    verifier = ChainVerifier(GAMMA + 1)
    lengths = torch.tensor([LENGTHS[r % 3] for r in range(SAMPLES)])

    def step(anchors, lens):
        candidates = _draft(anchors, Q, GAMMA, gen)
        p, q = P[candidates], Q[candidates[:, :-1]]
        out = verifier.verify_sampling(candidates, p, q, generator=gen, draft_lengths=lens)
        tokens = out.output_tokens.clone()
        if control:  # wrong: "opt out" = reject the first draft, emit from max(p - q, 0)
            keys = torch.randint(-(2**63), 2**63 - 1, (anchors.shape[0],), generator=gen)
            for r in (lens == 0).nonzero().flatten().tolist():
                x = int(candidates[r, 1])
                tokens[r, 0] = emit_reference(p[r, 0].tolist(), q[r, 0].tolist(), x, True,
                                              int(keys[r]), 0)
        return tokens, out.num_accepted

    anchors = torch.zeros(SAMPLES, dtype=torch.long)
    tokens, accepted = step(anchors, lengths)
    first, second = tokens[:, 0].clone(), tokens[:, 1].clone()
    need = second < 0
    again, _ = step(first[need], lengths[need])
    second[need] = again[:, 0]
    return torch.stack([first, second], 1), lengths, accepted


@pytest.mark.parametrize("name", ["random", "disjoint_supports", "q_zero_where_p_positive",
                                  "one_hot_q"])
def test_mixed_lengths_are_lossless_per_group(name):
    P, Q = CASES[name]
    pairs, lengths, accepted = _mixed_pairs(P, Q, 50 + sorted(CASES).index(name))
    assert (accepted.long() <= lengths).all() and (accepted[lengths == 0] == 0).all()
    for length in LENGTHS:
        first, joint = _check_lossless(pairs[lengths == length], P)
        assert first > P_THRESHOLD and joint > P_THRESHOLD, (length, first, joint)


def test_negative_control_opting_out_by_rejecting_the_first_draft_is_detected():
    P, Q = CASES["random"]
    pairs, lengths, _ = _mixed_pairs(P, Q, 60, control=True)
    first, _ = _check_lossless(pairs[lengths == 0], P)
    assert first < 1e-6


def test_mixed_parameters_and_lengths_opted_out_rows_are_plain_samples():
    """`verify_from_logits` with per-request parameters: greedy rows equal the argmax, sampled
    rows of every length follow the filtered target (opt-out rows: its anchor row)."""
    P, Q = CASES["random"]
    logits_table = torch.log(P.clamp(min=1e-9))
    gen = torch.Generator().manual_seed(70)
    b = SAMPLES
    anchors = torch.zeros(b, dtype=torch.long)
    candidates = _draft(anchors, Q, GAMMA, gen)
    lengths = torch.tensor([LENGTHS[r % 3] for r in range(b)])
    temperature = torch.where(torch.arange(b) % 6 < 3, 0.8, 0.0)  # every length, both kinds
    params = SamplingParams.of(b, temperature=temperature.tolist(), top_k=3,
                               seed=list(range(b)))
    out = ChainVerifier(GAMMA + 1).verify_from_logits(
        candidates, logits_table[candidates], None, params=params, draft_lengths=lengths,
        positions=torch.zeros(b, dtype=torch.long),
    )
    greedy = temperature == 0
    optout_greedy = greedy & (lengths == 0)
    assert (out.output_tokens[optout_greedy, 0] == int(logits_table[0].argmax())).all()
    assert (out.num_accepted.long() <= lengths).all()
    expected = filtered_distribution(logits_table[0], temperature=0.8, top_k=3, top_p=1.0,
                                     min_p=0.0)
    for length in LENGTHS:
        rows = ~greedy & (lengths == length)
        assert _pvalue(out.output_tokens[rows, 0], expected) > P_THRESHOLD, length
    assert V == P.shape[0]
