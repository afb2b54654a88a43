"""The chain draw by the exponential race on the random stream, over vocabularies of several race
blocks (the lossless tests of test_chain_sampling use V = 5, one block): lossless on both
backends (torch by chi-square, Triton by equality to it) with adversarial p / q placed across blocks and in the partial last block, with
negative controls that must reject (on torch); the same tokens on torch and Triton, and in any
batch composition, for seeded requests."""

import torch

from specreg.kernels.chain import verify_chain_sampling, verify_chain_target_only
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.random_stream.types import RACE_BLOCK
from specreg.sampling_params import SamplingParams
from specreg.testing.lossless import chi_square_p_value

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
    if target_only:
        result = verify_chain_target_only(candidates, target, seed=seed, backend=backend,
                                          offsets=torch.arange(samples))
    else:
        result = verify_chain_sampling(candidates, target, draft, seed=seed, backend=backend,
                                       offsets=torch.arange(samples))
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


def test_seeded_tokens_are_the_same_on_both_backends_and_in_any_batch():
    candidates, p, q = _chain_case(10, 4, 3)
    offsets = torch.arange(10) * 7 + 100
    full = verify_chain_sampling(candidates, p, q, seed=5, offsets=offsets, backend="torch")
    _same(full, verify_chain_sampling(candidates, p, q, seed=5, offsets=offsets,
                                      backend="triton"))
    assert (full.accept_len < 3).sum() >= 3  # corrections drawn, not only bonuses
    order = torch.tensor([7, 2, 9, 0])
    for backend in ("torch", "triton"):
        part = verify_chain_sampling(candidates[order], p[order], q[order], seed=5,
                                     offsets=offsets[order], backend=backend)
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
    offsets = torch.arange(8) + 3
    full = verify_chain_with_params(candidates, target, draft, params=params, offsets=offsets,
                                    backend="torch")
    _same(full, verify_chain_with_params(candidates, target, draft, params=params,
                                         offsets=offsets, backend="triton"))
    order = torch.tensor([5, 1, 6])
    for backend in ("torch", "triton"):
        part = verify_chain_with_params(candidates[order], target[order], draft[order],
                                        params=params.select(order), offsets=offsets[order],
                                        backend=backend)
        assert torch.equal(part.output_tokens, full.output_tokens[order])
