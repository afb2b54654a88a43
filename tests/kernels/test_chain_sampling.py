"""Chain rejection sampling: known answers and losslessness (chi-square at fixed seeds).

A tiny Markov "target" P[prev] and "drafter" Q[prev] over V tokens. Every sample is one request
in the batch: drafts are sampled from Q (exponential race), verified against P, and the first
two emitted tokens (a second verify step for requests that emitted only one) must follow
P(t1 | anchor) P(t2 | t1) exactly.
"""

import numpy as np
import pytest
import torch
from scipy.stats import chisquare

from specreg.step.chain_verifier import ChainVerifier
from specreg.errors import KernelInputError
from specreg.kernels.chain import (
    verify_chain_sampling,
    verify_chain_target_only,
)
from specreg.kernels.sampling import exponential_race_sample
from tests.support import independent_race

P_THRESHOLD = 1e-3
SAMPLES = 30_000
V = 5
ANCHOR = 0


def _normalise(table: torch.Tensor) -> torch.Tensor:
    return table / table.sum(-1, keepdim=True)


def _markov(base: list[float]) -> torch.Tensor:
    """A V x V table whose row `prev` is `base` rolled by prev (context dependence)."""
    row = torch.tensor(base, dtype=torch.float64)
    return _normalise(torch.stack([row.roll(prev) for prev in range(V)])).to(torch.float32)


CASES = {
    "random": (_markov([0.1, 0.4, 0.2, 0.25, 0.05]), _markov([0.3, 0.1, 0.3, 0.1, 0.2])),
    "p_equals_q": (_markov([0.1, 0.4, 0.2, 0.25, 0.05]), _markov([0.1, 0.4, 0.2, 0.25, 0.05])),
    "disjoint_supports": (_markov([0.5, 0.3, 0.2, 0.0, 0.0]), _markov([0.0, 0.0, 0.0, 0.7, 0.3])),
    "one_hot_q": (_markov([0.2, 0.2, 0.3, 0.2, 0.1]), _markov([0.0, 0.0, 1.0, 0.0, 0.0])),
    "q_zero_where_p_positive": (
        _markov([0.2, 0.2, 0.2, 0.2, 0.2]),
        _markov([0.0, 0.5, 0.5, 0.0, 0.0]),
    ),
    "near_ties": (
        _markov([0.2, 0.2 + 1e-6, 0.2, 0.2 - 1e-6, 0.2]),
        _markov([0.2 + 1e-6, 0.2, 0.2 - 1e-6, 0.2, 0.2]),
    ),
    "p_one_hot": (_markov([0.0, 0.0, 0.0, 1.0, 0.0]), _markov([0.1, 0.2, 0.3, 0.2, 0.2])),
    "q_covers_p_partially": (
        _markov([0.0, 0.6, 0.0, 0.4, 0.0]),
        _markov([0.3, 0.3, 0.0, 0.1, 0.3]),
    ),
}


def _draft(anchors: torch.Tensor, Q: torch.Tensor, gamma: int, gen: torch.Generator):
    columns = [anchors]
    for _ in range(gamma):
        columns.append(exponential_race_sample(Q[columns[-1]], generator=gen))
    return torch.stack(columns, dim=1)


def _step(anchors, P, Q, gamma, gen, *, verify, q_for_acceptance=None, verify_lens=None):
    candidates = _draft(anchors, Q, gamma, gen)
    target_probs = P[candidates]
    accept_q = Q if q_for_acceptance is None else q_for_acceptance
    draft_probs = accept_q[candidates[:, :-1]]
    if verify_lens is not None:
        verify_lens = verify_lens(anchors.shape[0], gen)
    return verify(candidates, target_probs, draft_probs, gen, verify_lens)


def _classic(candidates, target_probs, draft_probs, gen, verify_lens):
    return verify_chain_sampling(
        candidates, target_probs, draft_probs, generator=gen, verify_lens=verify_lens
    )


def _target_only(candidates, target_probs, draft_probs, gen, verify_lens):
    return verify_chain_target_only(
        candidates, target_probs, generator=gen, verify_lens=verify_lens
    )


def _first_two_tokens(P, Q, gamma, seed, *, verify=_classic, **kwargs) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    anchors = torch.full((SAMPLES,), ANCHOR, dtype=torch.long)
    result = _step(anchors, P, Q, gamma, gen, verify=verify, **kwargs)
    first = result.output_tokens[:, 0].clone()
    second = result.output_tokens[:, 1].clone() if gamma >= 1 else torch.full_like(first, -1)
    need = second < 0  # only one token emitted: run the next step from it
    if bool(need.any()):
        again = _step(first[need], P, Q, gamma, gen, verify=verify, **kwargs)
        second[need] = again.output_tokens[:, 0]
    return torch.stack([first, second], dim=1)


def _pvalue(observed: torch.Tensor, expected_probs: torch.Tensor) -> float:
    """Chi-square p-value; cells of probability 0 must be empty (checked, then dropped)."""
    counts = torch.bincount(observed, minlength=expected_probs.numel()).double().numpy()
    expected = expected_probs.double().numpy().ravel()
    empty = expected <= 0
    assert counts[empty].sum() == 0, "a token of target probability 0 was emitted"
    counts, expected = counts[~empty], expected[~empty]
    if counts.size == 1:
        return 1.0  # one possible outcome, and only it occurred
    return float(chisquare(counts, expected / expected.sum() * counts.sum()).pvalue)


def _joint_expected(P: torch.Tensor) -> torch.Tensor:
    first = P[ANCHOR].double()
    return (first[:, None] * P.double()).ravel()


def _check_lossless(pairs: torch.Tensor, P: torch.Tensor) -> tuple[float, float]:
    first = _pvalue(pairs[:, 0], P[ANCHOR])
    joint = _pvalue(pairs[:, 0] * V + pairs[:, 1], _joint_expected(P))
    return first, joint


@pytest.mark.parametrize("name", sorted(CASES))
def test_classic_chain_sampling_is_lossless(name):
    P, Q = CASES[name]
    pairs = _first_two_tokens(P, Q, gamma=3, seed=1000 + sorted(CASES).index(name))
    first, joint = _check_lossless(pairs, P)
    assert first > P_THRESHOLD and joint > P_THRESHOLD, (first, joint)


def test_lossless_with_ragged_verify_lens():
    P, Q = CASES["random"]

    def lens(b, gen):
        return torch.randint(1, 5, (b,), generator=gen)

    pairs = _first_two_tokens(P, Q, gamma=3, seed=7, verify_lens=lens)
    first, joint = _check_lossless(pairs, P)
    assert first > P_THRESHOLD and joint > P_THRESHOLD, (first, joint)


def test_lossless_with_no_drafts():
    P, Q = CASES["random"]
    gen = torch.Generator().manual_seed(8)
    anchors = torch.full((SAMPLES,), ANCHOR, dtype=torch.long)
    result = _step(anchors, P, Q, 0, gen, verify=_classic)
    assert int(result.accept_len.max()) == 0
    assert _pvalue(result.bonus, P[ANCHOR]) > P_THRESHOLD


@pytest.mark.parametrize("name", ["random", "disjoint_supports", "p_one_hot", "one_hot_q"])
def test_target_only_is_lossless_for_any_drafter(name):
    P, Q = CASES[name]
    pairs = _first_two_tokens(P, Q, gamma=3, seed=300, verify=_target_only)
    first, joint = _check_lossless(pairs, P)
    assert first > P_THRESHOLD and joint > P_THRESHOLD, (first, joint)


def test_target_only_is_lossless_for_a_deterministic_ngram_drafter():
    P, _ = CASES["random"]
    ngram = torch.zeros(V, V)
    ngram[torch.arange(V), (torch.arange(V) + 1) % V] = 1.0  # always drafts prev + 1
    pairs = _first_two_tokens(P, ngram, gamma=3, seed=301, verify=_target_only)
    first, joint = _check_lossless(pairs, P)
    assert first > P_THRESHOLD and joint > P_THRESHOLD, (first, joint)


def test_wrong_q_is_detected():
    """Negative control: accepting with a q other than the sampling q breaks losslessness,
    and the chi-square test sees it (so the tests above have power)."""
    P, Q = CASES["random"]
    for wrong_q in (P, _markov([0.2] * 5)):
        pairs = _first_two_tokens(P, Q, gamma=3, seed=11, q_for_acceptance=wrong_q)
        first, joint = _check_lossless(pairs, P)
        assert min(first, joint) < P_THRESHOLD, (first, joint)


def test_wrong_bonus_row_would_be_detected():
    """Negative control for the joint test: emitting the first token right but the second from
    the wrong context is caught by the joint statistic even though the first marginal passes."""
    P, _ = CASES["random"]
    gen = torch.Generator().manual_seed(12)
    first = exponential_race_sample(P[torch.full((SAMPLES,), ANCHOR)], generator=gen)
    second = exponential_race_sample(P[torch.full((SAMPLES,), ANCHOR)], generator=gen)
    first_p, joint_p = _check_lossless(torch.stack([first, second], 1), P)
    assert first_p > P_THRESHOLD and joint_p < P_THRESHOLD


def test_chain_verifier_uses_the_sampling_q():
    P, Q = CASES["random"]
    verifier = ChainVerifier(num_draft_tokens=4)

    def via_verifier(candidates, target_probs, draft_probs, gen, verify_lens):
        return verifier.verify_sampling(candidates, target_probs, draft_probs, generator=gen)

    pairs = _first_two_tokens(P, Q, gamma=3, seed=21, verify=via_verifier)
    first, joint = _check_lossless(pairs, P)
    assert first > P_THRESHOLD and joint > P_THRESHOLD, (first, joint)
    wrong = _first_two_tokens(P, Q, gamma=3, seed=21, verify=via_verifier, q_for_acceptance=P)
    assert min(_check_lossless(wrong, P)) < P_THRESHOLD


def test_keyed_verification_is_reproducible():
    P, Q = CASES["random"]
    gen = torch.Generator().manual_seed(3)
    candidates = _draft(torch.zeros(64, dtype=torch.long), Q, 3, gen)
    args = (candidates, P[candidates], Q[candidates[:, :-1]])
    keys, positions = torch.arange(64) + 42_000, torch.arange(64) * 3
    a = verify_chain_sampling(*args, keys=keys, positions=positions)
    b = verify_chain_sampling(*args, keys=keys.clone(), positions=positions.clone())
    c = verify_chain_sampling(*args, keys=keys + 64, positions=positions)
    d = verify_chain_sampling(*args, keys=keys, positions=positions + 1)
    assert torch.equal(a.output_tokens, b.output_tokens)
    assert not torch.equal(a.output_tokens, c.output_tokens)
    assert not torch.equal(a.output_tokens, d.output_tokens)


# ---------------------------------------------------------------------------------------------
# Known answers


def _probs(rows):
    return torch.tensor(rows, dtype=torch.float32)


def test_accept_rule_is_strict():
    candidates = torch.tensor([[0, 1]])
    p = _probs([[[0.5, 0.5, 0.0], [1.0, 0.0, 0.0]]])
    q = _probs([[[0.0, 1.0, 0.0]]])
    # coin * q = 0.5 is not < p = 0.5: rejected; residual max(p - q, 0) = [0.5, 0, 0] -> token 0
    r = verify_chain_sampling(candidates, p, q, coins=torch.tensor([[0.5]]),
                              keys=torch.tensor([9]))
    assert r.accept_len.tolist() == [0] and r.bonus.tolist() == [0]
    assert r.output_tokens.tolist() == [[0, -1]]
    # just below: accepted, bonus drawn from row 1 = one-hot 0
    r = verify_chain_sampling(candidates, p, q, coins=torch.tensor([[0.4999]]),
                              keys=torch.tensor([9]))
    assert r.accept_len.tolist() == [1] and r.output_tokens.tolist() == [[1, 0]]
    assert r.num_emitted.tolist() == [2]


def test_q_zero_accepts_when_p_positive_and_p_zero_never_accepts():
    candidates = torch.tensor([[0, 2], [0, 1]])
    p = _probs([[[0.5, 0.0, 0.5], [0.0, 1.0, 0.0]], [[0.5, 0.0, 0.5], [0.0, 1.0, 0.0]]])
    q = _probs([[[1.0, 0.0, 0.0]], [[0.0, 1.0, 0.0]]])
    r = verify_chain_sampling(candidates, p, q, coins=torch.tensor([[0.999], [0.0]]),
                              keys=torch.tensor([5, 6]))
    assert r.accept_len.tolist() == [1, 0]
    # row 1: the residual is [0.5, 0, 0.5]; its correction races at position 0 under key 6
    assert r.output_tokens[1, 0] == independent_race.race([0.5, 0.0, 0.5], 6,
                                                          independent_race.RESIDUAL, 0)
    assert r.output_tokens.tolist() == [[2, 1], [2, -1]]  # pinned from the independent race


def _race_by_hand(weights, key, role, position):
    """The race of `weights` under (key, role, absolute position), by the independent
    re-implementation of the stream and the two-level race (`tests.support.independent_race`)."""
    return independent_race.race(weights, key, role, position)


def test_correction_and_bonus_race_on_the_keyed_stream():
    candidates = torch.tensor([[3, 0, 1]] * 3)
    p = _probs([[[0.1, 0.2, 0.3, 0.4]] * 3] * 3)
    q = _probs([[[1.0, 0.0, 0.0, 0.0]] * 2] * 3)
    coins = torch.tensor([[0.5, 0.0], [0.05, 0.0], [0.05, 0.0]])
    keys, positions = torch.tensor([11, 11, 12]), torch.tensor([6, 4, 4])
    residual_role, sample_role = independent_race.RESIDUAL, independent_race.SAMPLE
    for backend in ("torch", "triton"):
        r = verify_chain_sampling(candidates, p, q, coins=coins, keys=keys, positions=positions,
                                  backend=backend)
        # row 0: 0.5 * 1 >= 0.1 rejected; the correction races on the residual [0, .2, .3, .4]
        # at position 6 in the RESIDUAL role
        # rows 1, 2: token 0 accepted; token 1 has q = 0 < p: accepted; the bonus races on p at
        # position 4 + 2 in the SAMPLE role
        assert r.accept_len.tolist() == [0, 2, 2]
        residual = [0.0, 0.2, 0.3, 0.4]
        assert r.bonus.tolist() == [_race_by_hand(residual, 11, residual_role, 6),
                                    _race_by_hand([0.1, 0.2, 0.3, 0.4], 11, sample_role, 6),
                                    _race_by_hand([0.1, 0.2, 0.3, 0.4], 12, sample_role, 6)]
        assert r.bonus.tolist() == [2, 0, 1]  # pinned: the independent race's tokens
    # token 0 has no residual mass: no key makes the correction draw it
    many = torch.randint(-(2**63), 2**63 - 1, (200,), generator=torch.Generator().manual_seed(1))
    rejected = verify_chain_sampling(candidates[:1].repeat(200, 1), p[:1].repeat(200, 1, 1),
                                     q[:1].repeat(200, 1, 1), coins=coins[:1].repeat(200, 1),
                                     keys=many)
    assert 0 not in rejected.bonus.tolist() and len(set(rejected.bonus.tolist())) == 3


def test_same_key_and_position_give_the_same_token_in_any_row_and_backend():
    """One request (key, position) placed at different rows of batches of other requests draws
    the same correction on torch and Triton, equal to the independent race (distinct keys at
    one position: test_chain_race's collision tests)."""
    vocab = 300
    gen = torch.Generator().manual_seed(6)
    p = torch.rand(6, 2, vocab, generator=gen)
    p = p / p.sum(-1, keepdim=True)
    q = torch.rand(6, 1, vocab, generator=gen)
    q = q / q.sum(-1, keepdim=True)
    candidates = torch.randint(0, vocab, (6, 2), generator=gen)
    keys = torch.randint(-(2**63), 2**63 - 1, (6,), generator=gen)
    positions = torch.randint(0, 100, (6,), generator=gen)
    coins = torch.full((6, 1), 0.999)
    candidates[:, 1] = (q[:, 0] - p[:, 0]).argmax(-1)  # q(x) well above p(x): rejected
    want = independent_race.race(
        independent_race.correction_weights(p[0, 0].numpy(), q[0, 0].numpy(), -1),
        int(keys[0]), independent_race.RESIDUAL, int(positions[0]),
    )
    for backend in ("torch", "triton"):
        for row in (0, 3, 5):
            order = torch.arange(6)
            order[0], order[row] = row, 0
            r = verify_chain_sampling(candidates[order], p[order], q[order], coins=coins,
                                      keys=keys[order], positions=positions[order],
                                      backend=backend)
            assert int(r.accept_len[row]) == 0 and int(r.bonus[row]) == want, (backend, row)


def test_ragged_verify_caps_and_retakes_bonus():
    candidates = torch.tensor([[0, 1, 2, 3]] * 3)
    one_hot = torch.eye(4)
    # The target agrees with every draft: row i is one-hot at candidates[i + 1]; row 3 at 0.
    p = torch.stack([one_hot[1], one_hot[2], one_hot[3], one_hot[0]])[None].repeat(3, 1, 1)
    q = p[:, :3].clone()
    r = verify_chain_sampling(candidates, p, q, keys=torch.tensor([0, 1, 2]),
                              verify_lens=torch.tensor([4, 2, 1]))
    assert r.accept_len.tolist() == [3, 1, 0]
    assert r.bonus.tolist() == [0, 2, 1]  # drawn from row verify_len - 1
    assert r.output_tokens.tolist() == [[1, 2, 3, 0], [1, 2, -1, -1], [1, -1, -1, -1]]


def test_target_only_known_answers():
    candidates = torch.tensor([[0, 1], [0, 1]])
    p = _probs([[[0.2, 0.5, 0.3], [1.0, 0.0, 0.0]]] * 2)
    coins = torch.tensor([[0.49], [0.5]])
    r = verify_chain_target_only(candidates, p, coins=coins, keys=torch.tensor([1, 3]))
    assert r.accept_len.tolist() == [1, 0]
    # row 0: bonus raced on the one-hot row [1, 0, 0]: token 0 whatever the key;
    # row 1 rejected: raced on p without token 1, [0.2, 0, 0.3], at position 0 under key 3
    race = _race_by_hand([0.2, 0.0, 0.3], 3, independent_race.RESIDUAL, 0)
    assert r.output_tokens.tolist() == [[1, 0], [race, -1]]
    assert r.output_tokens.tolist() == [[1, 0], [0, -1]]  # pinned: the independent race's token


def test_all_zero_q_row_is_rejected_on_cpu():
    candidates = torch.tensor([[0, 1]])
    p = _probs([[[0.5, 0.5], [0.5, 0.5]]])
    with pytest.raises(KernelInputError) as err:
        verify_chain_sampling(candidates, p, torch.zeros(1, 1, 2), keys=torch.tensor([0]))
    assert err.value.code == "SR904"
    assert "target_only" in str(err.value)



def test_large_vocab_torch_path():
    """V = 2**17: indices past 2**16 are gathered and sampled exactly."""
    vocab = 2**17
    candidates = torch.tensor([[5, vocab - 1, 70_000], [5, vocab - 2, 3]])
    p = torch.zeros(2, 3, vocab)
    p[:, 0, vocab - 1] = 1.0
    p[:, 1, 70_000] = 0.5
    p[:, 1, 100_000] = 0.5
    p[:, 2, 99_999] = 1.0
    q = torch.zeros(2, 2, vocab)
    q[0, 0, vocab - 1] = 1.0
    q[0, 1, 70_000] = 1.0
    q[1, :, vocab - 2] = 1.0
    q[1, 1, 3] = 1.0
    coins = torch.tensor([[0.3, 0.9], [0.3, 0.3]])
    r = verify_chain_sampling(candidates, p, q, coins=coins, keys=torch.tensor([5, 5]))
    # row 0: accept vocab-1 (p = 1), reject 70_000 (0.9 >= 0.5): residual = one-hot 100_000
    # row 1: vocab-2 has p = 0: rejected; residual = p row 0 = one-hot vocab-1
    assert r.accept_len.tolist() == [1, 0]
    assert r.output_tokens.tolist() == [[vocab - 1, 100_000, -1], [vocab - 1, -1, -1]]


def test_generator_coins_drive_results():
    P, Q = CASES["random"]
    gen = torch.Generator().manual_seed(4)
    candidates = _draft(torch.zeros(256, dtype=torch.long), Q, 3, gen)
    args = (candidates, P[candidates], Q[candidates[:, :-1]])
    a = verify_chain_sampling(*args, generator=torch.Generator().manual_seed(9))
    b = verify_chain_sampling(*args, generator=torch.Generator().manual_seed(9))
    assert torch.equal(a.output_tokens, b.output_tokens)
    assert np.unique(a.accept_len.numpy()).size > 1
