"""Torch vs Triton (interpreter) for the fused Markov greedy step and the draft-block builder."""

import pytest
import torch
from specreg_dspark.kernels.draft_block import build_draft_block
from specreg_dspark.kernels.draft_block.torch_impl import build_draft_block_torch
from specreg_dspark.kernels.draft_block.triton_impl import build_draft_block_triton
from specreg_dspark.kernels.markov_greedy import markov_greedy_step
from specreg_dspark.kernels.markov_greedy.torch_impl import (
    markov_greedy_step_chunked_torch,
    markov_greedy_step_torch,
)
from specreg_dspark.kernels.markov_greedy.triton_impl import markov_greedy_step_triton

from specreg import KernelInputError


def _integer_case(b, vocab, rank, seed):
    """Small integers: every sum is exact in float32, so ties are exact too."""
    g = torch.Generator().manual_seed(seed)
    base = torch.randint(-2, 3, (b, vocab), generator=g).float()
    w1 = torch.randint(-1, 2, (vocab, rank), generator=g).float()
    w2 = torch.randint(-1, 2, (vocab, rank), generator=g).float()
    prev = torch.randint(0, vocab, (b,), generator=g)
    scores = base + w1[prev] @ w2.T
    best = scores.argmax(-1)
    twin = (best + 17) % vocab  # give every row an exact tie, often in another tile
    rows = torch.arange(b)
    base[rows, twin] += scores[rows, best] - scores[rows, twin]
    return base, prev, w1, w2


@pytest.mark.parametrize(
    ("b", "vocab", "rank", "block_v"),
    [(1, 37, 5, 16), (3, 50, 20, 16), (20, 33, 16, 32), (2, 16, 3, 16)],
)
def test_fused_step_triton_equals_two_step_torch_with_exact_ties(b, vocab, rank, block_v):
    base, prev, w1, w2 = _integer_case(b, vocab, rank, seed=b * 100 + vocab)
    expected = markov_greedy_step_torch(base, prev, w1, w2)
    scores = base + w1[prev] @ w2.T
    assert bool((scores == scores.max(-1, keepdim=True).values).sum(-1).gt(1).any())  # ties exist
    got = markov_greedy_step_triton(base, prev, w1, w2, block_v=block_v)
    assert torch.equal(got, expected)
    assert torch.equal(markov_greedy_step_chunked_torch(base, prev, w1, w2, chunk=7), expected)


def test_fused_step_random_floats(force_backend):
    g = torch.Generator().manual_seed(3)
    base, w1, w2 = torch.randn(4, 45, generator=g), torch.randn(45, 8, generator=g), torch.randn(45, 8, generator=g)
    prev = torch.tensor([0, 44, 7, 7])
    expected = markov_greedy_step_torch(base, prev, w1, w2)
    force_backend("triton")
    assert torch.equal(markov_greedy_step(base, prev, w1, w2, block_v=16), expected)


@pytest.mark.parametrize(("first", "second"), [(5, 20), (3, 4), (0, 36), (17, 33)])
def test_ties_across_and_within_tiles_go_to_the_lowest_index(first, second):
    vocab, rank = 37, 4
    base = torch.zeros(1, vocab)
    base[0, first] = base[0, second] = 2.0
    w1, w2 = torch.zeros(vocab, rank), torch.zeros(vocab, rank)
    prev = torch.tensor([1])
    assert int(markov_greedy_step_triton(base, prev, w1, w2, block_v=16)[0]) == first
    assert int(markov_greedy_step_torch(base, prev, w1, w2)[0]) == first
    assert int(markov_greedy_step_chunked_torch(base, prev, w1, w2, chunk=16)[0]) == first


def test_all_minus_infinity_row_returns_zero_like_torch_argmax():
    base = torch.full((2, 20), float("-inf"))
    w1, w2, prev = torch.zeros(20, 3), torch.zeros(20, 3), torch.tensor([0, 1])
    assert markov_greedy_step_triton(base, prev, w1, w2, block_v=16).tolist() == [0, 0]
    assert markov_greedy_step_torch(base, prev, w1, w2).tolist() == [0, 0]


def test_bias_is_used_not_only_base():
    vocab, rank = 20, 2
    base = torch.zeros(1, vocab)
    base[0, 3] = 1.0
    w1, w2 = torch.zeros(vocab, rank), torch.zeros(vocab, rank)
    w1[5] = torch.tensor([1.0, 0.0])
    w2[17] = torch.tensor([2.0, 0.0])  # bias[17] = 2 when prev == 5
    prev = torch.tensor([5])
    assert int(markov_greedy_step_triton(base, prev, w1, w2, block_v=16)[0]) == 17
    assert int(markov_greedy_step(base, torch.tensor([4]), w1, w2)[0]) == 3


def test_fused_step_input_errors():
    base, prev, w1, w2 = _integer_case(2, 20, 4, seed=0)
    with pytest.raises(KernelInputError) as info:
        markov_greedy_step(base, prev, w1, w2[:, :3])
    assert info.value.code == "SR900"
    with pytest.raises(KernelInputError) as info:
        markov_greedy_step(base, prev.float(), w1, w2)
    assert info.value.code == "SR901"
    with pytest.raises(KernelInputError) as info:
        markov_greedy_step(base, prev, w1, w2.double())
    assert info.value.code == "SR901"
    with pytest.raises(KernelInputError) as info:
        markov_greedy_step(base, torch.tensor([0, 20]), w1, w2)
    assert info.value.code == "SR903"
    with pytest.raises(KernelInputError) as info:
        markov_greedy_step(base, prev, w1.to("meta"), w2.to("meta"))
    assert info.value.code == "SR902"
    with pytest.raises(KernelInputError) as info:
        markov_greedy_step(base, prev, w1, w2, block_v=24)
    assert info.value.code == "SR904"


@pytest.mark.parametrize("width", [1, 7, 8, 17])
def test_draft_block_triton_equals_torch(width):
    anchor = torch.tensor([5, 0, 63], dtype=torch.int32)
    positions = torch.tensor([10, 0, 1000])
    ids, pos = build_draft_block_torch(anchor, positions, width, 62)
    assert ids[:, 0].tolist() == [5, 0, 63] and bool((ids[:, 1:] == 62).all())
    assert pos[2].tolist() == list(range(1000, 1000 + width))
    t_ids, t_pos = build_draft_block_triton(anchor, positions, width, 62)
    assert torch.equal(t_ids, ids) and torch.equal(t_pos, pos)


def test_draft_block_dispatch_and_errors(force_backend):
    anchor, positions = torch.tensor([1, 2]), torch.tensor([3, 4])
    expected = build_draft_block(anchor, positions, width=4, mask_token_id=9, vocab_size=10)
    force_backend("triton")
    got = build_draft_block(anchor, positions, width=4, mask_token_id=9, vocab_size=10)
    assert all(torch.equal(a, b) for a, b in zip(got, expected, strict=True))
    cases = [
        (dict(width=0, mask_token_id=9), "SR904"),
        (dict(width=4, mask_token_id=10, vocab_size=10), "SR903"),
        (dict(width=4, mask_token_id=-1), "SR904"),
    ]
    for kwargs, code in cases:
        with pytest.raises(KernelInputError) as info:
            build_draft_block(anchor, positions, **kwargs)
        assert info.value.code == code
    with pytest.raises(KernelInputError) as info:
        build_draft_block(torch.tensor([1, 12]), positions, width=4, mask_token_id=9, vocab_size=10)
    assert info.value.code == "SR903"
    with pytest.raises(KernelInputError) as info:
        build_draft_block(anchor[None], positions, width=4, mask_token_id=9)
    assert info.value.code == "SR900"
    with pytest.raises(KernelInputError) as info:
        build_draft_block(anchor.float(), positions, width=4, mask_token_id=9)
    assert info.value.code == "SR901"
