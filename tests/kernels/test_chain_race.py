"""The chain draw by the exponential race on the random stream, over vocabularies of several race
blocks (the lossless tests of test_chain_sampling use V = 5, one block): lossless on both
backends (torch by chi-square, Triton by equality to it) with adversarial p / q placed across blocks and in the partial last block, with
negative controls that must reject (on torch); the same tokens on torch and Triton, and in any
batch composition, for keyed requests; the tokens equal an independent re-implementation of the
stream and the race (`tests.support.independent_race`); distinct keys at one position draw
distinct corrections."""

import numpy as np
import torch

from specreg.kernels.chain import verify_chain_sampling, verify_chain_target_only
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.random_stream.types import RACE_BLOCK
from specreg.contract.sampling_params import SamplingParams
from specreg.testing.lossless import chi_square_p_value
from tests.support import independent_race

VOCAB = 2 * RACE_BLOCK + 44  # two full race blocks and a partial one


def _adversarial() -> tuple[torch.Tensor, torch.Tensor]:
    """p with mass in block 0, in the partial block 2 and thin everywhere; q heavy on block 1
    and on part of p's heavy tokens, so the residual lives in blocks 0 and 2 only."""
    p = torch.full((VOCAB,), 1e-4, dtype=torch.float64)
    p[3], p[70], p[127] = 0.15, 0.1, 0.05  # block 0, its last token included
    p[RACE_BLOCK * 2 + 1], p[VOCAB - 1] = 0.2, 0.12  # the partial block, its last token
    p[RACE_BLOCK + 5] = 0.08
    q = torch.full((VOCAB,), 2e-4, dtype=torch.float64)
    q[RACE_BLOCK : 2 * RACE_BLOCK] += 0.5 / RACE_BLOCK
    q[3], q[RACE_BLOCK + 5], q[VOCAB - 1] = 0.2, 0.15, 0.05
    return (p / p.sum()).float(), (q / q.sum()).float()


def _first_tokens(p, q, samples, seed, backend, *, accept_q=None, target_only=False):
    """One verify step of `samples` requests with gamma = 2 drafts sampled from q (context-free
    p and q): the first emitted token of each, which must follow p."""
    gen = torch.Generator().manual_seed(seed)
    drafts = torch.multinomial(q, samples * 2, replacement=True, generator=gen).view(samples, 2)
    candidates = torch.cat([torch.zeros(samples, 1, dtype=torch.int64), drafts], dim=1)
    target = p.expand(samples, 3, VOCAB)
    draft = (q if accept_q is None else accept_q).expand(samples, 2, VOCAB)
    keys = seed * 1_000_003 + torch.arange(samples)  # one key per request
    positions = torch.arange(samples) % 17
    if target_only:
        result = verify_chain_target_only(candidates, target, keys=keys, positions=positions,
                                          backend=backend)
    else:
        result = verify_chain_sampling(candidates, target, draft, keys=keys,
                                       positions=positions, backend=backend)
    return result.output_tokens[:, 0]


def _p_value(tokens: torch.Tensor, p: torch.Tensor) -> float:
    return chi_square_p_value(torch.bincount(tokens, minlength=VOCAB).double(), p.double())


def test_race_over_several_blocks_is_lossless_with_controls():
    """On torch; the Triton kernel's draws are these bit for bit (the seeded tests below), and a
    chi-square of the same power under the interpreter costs about 15 minutes."""
    backend, samples = "torch", 40000
    p, q = _adversarial()
    assert _p_value(_first_tokens(p, q, samples, 11, backend), p) > 1e-3
    assert _p_value(_first_tokens(p, q, samples, 12, backend, target_only=True), p) > 1e-3
    # control: acceptance tested against a q the drafts were not sampled from
    flat = torch.full((VOCAB,), 1.0 / VOCAB)
    assert _p_value(_first_tokens(p, q, samples, 13, backend, accept_q=flat), p) < 1e-6


def test_race_control_with_a_shifted_block_rejects():
    """Control on the draw itself: tokens drawn by the race from p, then moved one race block
    on (what a wrong block index would do), fail the same test."""
    p, q = _adversarial()
    tokens = _first_tokens(p, p, 40000, 21, "torch")  # q = p: every draft accepted
    assert _p_value(tokens, p) > 1e-3
    assert _p_value((tokens + RACE_BLOCK) % VOCAB, p) < 1e-6


def _chain_case(b, n, seed):
    gen = torch.Generator().manual_seed(seed)
    p = torch.rand(b, n, VOCAB, generator=gen).pow(6)
    q = torch.rand(b, n - 1, VOCAB, generator=gen).pow(6)
    p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
    candidates = torch.randint(0, VOCAB, (b, n), generator=gen)
    agree = torch.rand(b, n - 1, generator=gen) < 0.6
    candidates[:, 1:] = torch.where(agree, p[:, :-1].argmax(-1), candidates[:, 1:])
    return candidates, p, q


def _same(a, b):
    assert torch.equal(a.output_tokens, b.output_tokens)
    assert torch.equal(a.accept_len, b.accept_len)


def test_keyed_tokens_are_the_same_on_both_backends_and_in_any_batch():
    candidates, p, q = _chain_case(10, 4, 3)
    keys = torch.arange(10) * 7919 - 5
    positions = torch.arange(10) * 7 + 100
    full = verify_chain_sampling(candidates, p, q, keys=keys, positions=positions,
                                 backend="torch")
    _same(full, verify_chain_sampling(candidates, p, q, keys=keys, positions=positions,
                                      backend="triton"))
    assert (full.accept_len < 3).sum() >= 3  # corrections drawn, not only bonuses
    order = torch.tensor([7, 2, 9, 0])
    for backend in ("torch", "triton"):
        part = verify_chain_sampling(candidates[order], p[order], q[order], keys=keys[order],
                                     positions=positions[order], backend=backend)
        assert torch.equal(part.output_tokens, full.output_tokens[order])


def test_seeded_tokens_with_params_are_the_same_on_both_backends_and_in_any_batch():
    candidates, p, q = _chain_case(8, 4, 4)
    target, draft = torch.log(p) * 2.0, torch.log(q) * 2.0
    params = SamplingParams.of(
        8,
        temperature=[0.7, 1.0, 1.3, 0.0, 0.9, 1.0, 1.1, 0.8],
        top_k=[0, 50, 0, 0, 20, 0, 0, 100], top_p=[1.0, 1.0, 0.9, 1.0, 1.0, 0.8, 1.0, 0.95],
        min_p=[0.0, 0.0, 0.0, 0.0, 0.05, 0.0, 0.0, 0.0], seed=list(range(40, 48)),
    )
    positions = torch.arange(8) + 3
    full = verify_chain_with_params(candidates, target, draft, params=params,
                                    positions=positions, backend="torch")
    _same(full, verify_chain_with_params(candidates, target, draft, params=params,
                                         positions=positions, backend="triton"))
    order = torch.tensor([5, 1, 6])
    for backend in ("torch", "triton"):
        part = verify_chain_with_params(candidates[order], target[order], draft[order],
                                        params=params.select(order),
                                        positions=positions[order], backend=backend)
        assert torch.equal(part.output_tokens, full.output_tokens[order])


def _independent(candidates, p, q, keys, positions, verify_lens=None):
    """(accept_len, emitted token) per request by `tests.support.independent_race`."""
    found = []
    for r in range(candidates.shape[0]):
        limit = None if verify_lens is None else int(verify_lens[r])
        found.append(independent_race.chain(
            candidates[r].tolist(), p[r].numpy(), None if q is None else q[r].numpy(),
            int(keys[r]), int(positions[r]), limit,
        ))
    return [a for a, _ in found], [t for _, t in found]


def test_tokens_match_an_independent_stream_and_race():
    """Known answers from a re-implementation of the stream and the two-level race written from
    their definitions (not specreg's helpers): one block, several blocks with a partial last
    one, and eight blocks; classic and target-only, ragged lengths, 64-bit and negative keys,
    nonzero positions; corrections and bonuses both occur."""
    for vocab, seed in ((5, 1), (VOCAB, 2), (8 * RACE_BLOCK + 3, 3)):
        gen = torch.Generator().manual_seed(seed)
        b, n = 12, 4
        p = torch.rand(b, n, vocab, generator=gen).pow(4)
        q = torch.rand(b, n - 1, vocab, generator=gen).pow(4)
        p, q = p / p.sum(-1, keepdim=True), q / q.sum(-1, keepdim=True)
        candidates = torch.randint(0, vocab, (b, n), generator=gen)
        agree = torch.rand(b, n - 1, generator=gen) < 0.7
        candidates[:, 1:] = torch.where(agree, p[:, :-1].argmax(-1), candidates[:, 1:])
        keys = torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen)
        positions = torch.randint(0, 5000, (b,), generator=gen)
        lens = torch.randint(1, n + 1, (b,), generator=gen)
        for q_, verify_lens in ((q, None), (None, None), (q, lens)):
            want_accept, want_tokens = _independent(candidates, p, q_, keys, positions,
                                                    verify_lens)
            if q_ is not None:  # target-only rejects almost every draft of a wide p
                assert len(set(want_accept)) > 1, (vocab, want_accept)
            for backend in ("torch", "triton"):
                got = verify_chain_sampling(candidates, p, q_, keys=keys, positions=positions,
                                            verify_lens=verify_lens, backend=backend)
                assert got.accept_len.tolist() == want_accept, (vocab, backend)
                assert got.bonus.tolist() == want_tokens, (vocab, backend)


def _one_rejection(requests: int, vocab: int) -> tuple[torch.Tensor, ...]:
    """`requests` copies of one chain whose only draft is always rejected (p(x) = 0), with a
    residual spread over every race block."""
    p = torch.linspace(1.0, 2.0, vocab)
    p[7] = 0.0
    p = (p / p.sum()).expand(requests, 2, vocab)
    q = torch.zeros(requests, 1, vocab)
    q[:, 0, 7] = 1.0
    candidates = torch.tensor([[0, 7]]).expand(requests, 2)
    return candidates, p, q


def test_distinct_keys_at_one_position_draw_distinct_corrections():
    """The correction race is keyed by all 64 bits of the key (not a 24-bit coin): requests
    whose keys share their low 32 bits, at the same position, draw different corrections (many
    distinct tokens, matching the independent race); one key at distinct positions does too;
    the same key and position give the same token in every row."""
    requests, vocab = 64, VOCAB
    candidates, p, q = _one_rejection(requests, vocab)
    high_bits = 12345 + (torch.arange(requests, dtype=torch.int64) << 32)
    same_position = torch.full((requests,), 9, dtype=torch.int64)
    for backend in ("torch", "triton"):
        got = verify_chain_sampling(candidates, p, q, keys=high_bits, positions=same_position,
                                    backend=backend)
        assert got.accept_len.tolist() == [0] * requests
        tokens = got.bonus.tolist()
        assert 7 not in tokens and len(set(tokens)) > requests // 2, tokens
        assert tokens == _independent(candidates, p, q, high_bits, same_position)[1]
        moving = verify_chain_sampling(candidates, p, q, keys=torch.full((requests,), 12345),
                                       positions=torch.arange(requests), backend=backend)
        assert len(set(moving.bonus.tolist())) > requests // 2
        repeated = verify_chain_sampling(candidates, p, q, keys=torch.full((requests,), 12345),
                                         positions=same_position, backend=backend)
        assert set(repeated.bonus.tolist()) == {tokens[0]}


def test_pairs_of_keys_collide_at_the_rate_of_the_distribution():
    """Two requests with different keys at the same position agree on their correction only
    as often as two independent draws from the residual would: sum of w**2, far from always
    (the old final-coin race made keys whose coins rounded alike collide every time)."""
    requests, vocab = 4000, 2 * RACE_BLOCK
    candidates, p, q = _one_rejection(requests, vocab)
    keys = torch.randint(-(2**63), 2**63 - 1, (requests,),
                         generator=torch.Generator().manual_seed(5))
    tokens = verify_chain_sampling(candidates, p, q, keys=keys,
                                   positions=torch.zeros(requests, dtype=torch.int64),
                                   backend="torch").bonus
    a, b = tokens[: requests // 2], tokens[requests // 2 :]
    w = p[0, 0].double().numpy()
    expected = float(np.sum(w**2))
    assert float((a == b).double().mean()) < 10 * expected + 0.01


def test_a_seeded_request_is_keyed_by_its_seed():
    """Under per-request sampling parameters a seeded request's key is its seed: at
    temperature 1 without filters its tokens are those of `verify_chain_sampling` under that key
    (dyadic probabilities, so the renormalised rows keep their bits)."""
    b, n, vocab = 6, 3, 2 * RACE_BLOCK + 8
    gen = torch.Generator().manual_seed(8)
    p = torch.randint(1, 5, (b, n, vocab), generator=gen).float()
    p[..., 9::2] = 0
    q = torch.randint(1, 5, (b, n - 1, vocab), generator=gen).float()
    p, q = p / 2**12, q / 2**12
    p[..., -1] += 1 - p.sum(-1)
    q[..., -1] += 1 - q.sum(-1)
    assert bool((p.sum(-1) == 1).all() and (q.sum(-1) == 1).all() and (p >= 0).all())
    candidates = torch.randint(0, vocab, (b, n), generator=gen)
    seeds = [3, 77, 2**40 + 1, 3, 5, 6]
    params = SamplingParams.of(b, temperature=[1.0] * b, seed=seeds)
    positions = torch.tensor([0, 4, 9, 0, 2, 1])
    for backend in ("torch", "triton"):
        got = verify_chain_with_params(candidates, p, q, params=params, probabilities=True,
                                       positions=positions, backend=backend)
        want = verify_chain_sampling(candidates, p, q, keys=torch.tensor(seeds),
                                     positions=positions, backend=backend)
        _same(got, want)
