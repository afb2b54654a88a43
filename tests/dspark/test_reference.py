"""Every DSpark kernel family against its plain per-row rule (`reference.py`): torch and Triton.

Greedy paths compare exactly (integer-valued inputs make every sum exact, ties included);
sampling paths compare exactly given the same exponential-race noise.
"""

import pytest
import torch
from specreg_dspark.kernels.draft_block import build_draft_block
from specreg_dspark.kernels.draft_block.reference import build_draft_block_reference
from specreg_dspark.kernels.draft_block.torch_impl import build_draft_block_torch
from specreg_dspark.kernels.draft_block.triton_impl import build_draft_block_triton
from specreg_dspark.kernels.markov_greedy import markov_greedy_step
from specreg_dspark.kernels.markov_greedy.reference import markov_greedy_step_reference
from specreg_dspark.kernels.markov_greedy.torch_impl import (
    markov_greedy_step_chunked_torch,
    markov_greedy_step_torch,
)
from specreg_dspark.kernels.markov_greedy.triton_impl import markov_greedy_step_triton
from specreg_dspark.kernels.markov_head import make_markov_head
from specreg_dspark.kernels.markov_head.reference import (
    markov_block_reference,
    markov_step_reference,
)
from specreg_dspark.kernels.markov_head.torch_impl import ExponentialRaceSampler, greedy_sampler

from specreg.kernels.sampling import exponential_race_sample


# ----------------------------------------------------------------------------------- draft_block
@pytest.mark.parametrize(("b", "width"), [(0, 4), (1, 1), (3, 7), (2, 16), (4, 17)])
def test_draft_block_torch_and_triton_equal_the_reference(b, width):
    g = torch.Generator().manual_seed(b * 31 + width)
    anchor = torch.randint(0, 100, (b,), generator=g, dtype=torch.int32)
    positions = torch.randint(0, 5000, (b,), generator=g)
    expected = build_draft_block_reference(anchor, positions, width, 99)
    assert expected[0].shape == (b, width)
    for got in (
        build_draft_block_torch(anchor, positions, width, 99),
        build_draft_block_triton(anchor.contiguous(), positions.contiguous(), width, 99),
    ):
        assert all(torch.equal(a, e) for a, e in zip(got, expected, strict=True))


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_draft_block_wrapper_backend_argument(backend):
    anchor, positions = torch.tensor([3, 8]), torch.tensor([0, 41])
    got = build_draft_block(anchor, positions, width=5, mask_token_id=9, backend=backend)
    expected = build_draft_block_reference(anchor, positions, 5, 9)
    assert all(torch.equal(a, e) for a, e in zip(got, expected, strict=True))


# --------------------------------------------------------------------------------- markov_greedy
def _integer_case(b, vocab, rank, seed):
    """Small integers (every sum exact in float32); every row gets an exact tie for the max."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(-2, 3, (b, vocab), generator=g).float()
    w1 = torch.randint(-1, 2, (vocab, rank), generator=g).float()
    w2 = torch.randint(-1, 2, (vocab, rank), generator=g).float()
    prev = torch.randint(0, vocab, (b,), generator=g)
    scores = base + w1[prev] @ w2.T
    best = scores.argmax(-1)
    twin = (best + 11) % vocab
    rows = torch.arange(b)
    base[rows, twin] += scores[rows, best] - scores[rows, twin]
    return base, prev, w1, w2


@pytest.mark.parametrize(
    ("b", "vocab", "rank", "block_v", "chunk"),
    [(1, 37, 5, 16, 7), (3, 50, 20, 16, 16), (20, 33, 16, 32, 50), (5, 130, 3, 64, 1)],
)
def test_markov_greedy_every_implementation_equals_the_reference(b, vocab, rank, block_v, chunk):
    base, prev, w1, w2 = _integer_case(b, vocab, rank, seed=b * 1000 + vocab)
    expected = markov_greedy_step_reference(base, prev, w1, w2)
    assert torch.equal(markov_greedy_step_torch(base, prev, w1, w2), expected)
    # the chunked CPU path: several chunks (chunk < vocab), a tie across chunks keeps the first
    assert torch.equal(markov_greedy_step_chunked_torch(base, prev, w1, w2, chunk=chunk), expected)
    assert torch.equal(markov_greedy_step_triton(base, prev, w1, w2, block_v=block_v), expected)
    for backend in ("torch", "triton"):
        assert torch.equal(markov_greedy_step(base, prev, w1, w2, backend=backend), expected)


def test_markov_greedy_reference_ties_and_minus_infinity():
    base = torch.full((2, 20), float("-inf"))
    base[1, 4] = base[1, 9] = 1.0
    w1, w2, prev = torch.zeros(20, 3), torch.zeros(20, 3), torch.tensor([0, 1])
    assert markov_greedy_step_reference(base, prev, w1, w2).tolist() == [0, 4]
    assert markov_greedy_step_triton(base, prev, w1, w2, block_v=16).tolist() == [0, 4]
    assert markov_greedy_step_chunked_torch(base, prev, w1, w2, chunk=5).tolist() == [0, 4]


# ----------------------------------------------------------------------------------- markov_head
def _head(kind, vocab=13, rank=4, hidden=6, seed=0):
    torch.manual_seed(seed)
    head = make_markov_head(kind, vocab_size=vocab, rank=rank, hidden_size=hidden)
    with torch.no_grad():
        for p in head.parameters():
            p.mul_(3.0)
    return head


class _NoiseSampler:
    """The exponential race with pre-drawn noise, one [b, V] slice per slot."""

    def __init__(self, temperature, noise):
        self.probs = ExponentialRaceSampler(temperature).probs
        self.noise, self.slot = noise, 0

    def __call__(self, logits):
        noise = self.noise[:, self.slot]
        self.slot += 1
        return exponential_race_sample(self.probs(logits), noise=noise)


@pytest.mark.parametrize("kind", ["vanilla", "gated", "rnn"])
def test_head_step_equals_the_reference(kind):
    head = _head(kind, seed=4)
    prev, hidden = torch.tensor([0, 7, 12]), torch.randn(3, 6)
    with torch.no_grad():
        state = head.init_state(3, hidden)
        bias, next_state = head(prev, hidden, state)
    for row in range(3):
        start = None if state is None else state[row].tolist()
        ref_bias, ref_state = markov_step_reference(
            head, int(prev[row]), hidden[row].tolist(), start
        )
        ref_bias, ref_state = (torch.tensor(x, dtype=torch.float64) if x is not None else None
                               for x in (ref_bias, ref_state))  # fmt: skip
        assert torch.allclose(bias[row].double(), ref_bias, atol=1e-4)
        if next_state is not None:
            assert torch.allclose(next_state[row].double(), ref_state, atol=1e-5)


@pytest.mark.parametrize("kind", ["vanilla", "gated", "rnn"])
def test_greedy_walk_equals_the_reference(kind):
    head = _head(kind, seed=5)
    g = torch.Generator().manual_seed(5)
    base, hidden = torch.randn(4, 5, 13, generator=g), torch.randn(4, 5, 6, generator=g)
    anchor = torch.tensor([0, 3, 12, 7])
    tokens, corrected = markov_block_reference(head, base, anchor, hidden)
    with torch.no_grad():
        walked, got = head.sample_block(base, anchor, hidden, greedy_sampler)
        assert torch.equal(head.greedy_block(base, anchor, hidden, backend="torch"), tokens)
    assert torch.equal(walked, tokens)
    assert torch.allclose(got.double(), corrected, atol=1e-4)


@pytest.mark.parametrize("kind", ["vanilla", "gated", "rnn"])
@pytest.mark.parametrize("temperature", [0.7, 1.0])
def test_sampled_walk_equals_the_reference_with_the_same_noise(kind, temperature):
    head = _head(kind, seed=6)
    g = torch.Generator().manual_seed(6)
    base, hidden = torch.randn(5, 4, 13, generator=g), torch.randn(5, 4, 6, generator=g)
    anchor = torch.tensor([1, 2, 3, 4, 5])
    noise = torch.empty(5, 4, 13).exponential_(generator=g)
    tokens, corrected = markov_block_reference(
        head, base, anchor, hidden, temperature=temperature, noise=noise
    )
    with torch.no_grad():
        got, got_logits = head.sample_block(base, anchor, hidden, _NoiseSampler(temperature, noise))
    assert torch.equal(got, tokens)
    assert torch.allclose(got_logits.double(), corrected, atol=1e-4)


def test_vanilla_greedy_walk_through_the_triton_step_equals_the_reference():
    """Integer weights: the fused Triton step and the reference agree exactly, ties included."""
    vocab, rank = 40, 3
    head = make_markov_head("vanilla", vocab_size=vocab, rank=rank)
    g = torch.Generator().manual_seed(7)
    with torch.no_grad():
        head.markov_w1.weight.copy_(torch.randint(-1, 2, (vocab, rank), generator=g).float())
        head.markov_w2.weight.copy_(torch.randint(-1, 2, (vocab, rank), generator=g).float())
    base = torch.randint(-2, 3, (3, 4, vocab), generator=g).float()
    anchor = torch.tensor([0, 17, 39])
    tokens, _ = markov_block_reference(head, base, anchor)
    with torch.no_grad():
        assert torch.equal(head.greedy_block(base, anchor, backend="triton"), tokens)
        assert torch.equal(head.greedy_block(base, anchor, backend="torch"), tokens)
