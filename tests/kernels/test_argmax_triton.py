"""The Triton row argmax (the device function the chain, params and EAGLE kernels fuse) against the
plain per-row rule, through Triton's interpreter: ties within and across tiles, -inf rows,
signed zeros, strided rows, a vocabulary that is not a multiple of the tile, and an empty batch.
NaN is excluded: callers reject it before they launch (the module docstring says so)."""

import pytest
import torch

from specreg.kernels.argmax.reference import row_argmax_reference
from specreg.kernels.argmax.triton_impl import row_argmax_triton

INF = float("inf")


def _rows(vocab: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(vocab)
    rows = torch.randn(10, vocab, generator=gen)
    rows[0, sorted({min(1, vocab - 1), min(17, vocab - 1), vocab - 1})] = 9.0  # a tie across tiles
    rows[1, sorted({min(4, vocab - 1), min(5, vocab - 1)})] = 9.0  # a tie inside one tile
    rows[2] = -INF  # all -inf: index 0
    rows[3] = 0.0
    rows[3, :2] = -0.0  # signed zeros are equal: the first wins
    rows[4, vocab - 1] = INF  # the last column, in a partial last tile
    rows[5] = 1.0  # every column ties
    rows[6] = torch.arange(vocab, dtype=torch.float32)  # increasing: the last index
    return rows


@pytest.mark.parametrize("vocab", [1, 16, 37, 300])
@pytest.mark.parametrize("block_v", [None, 16])
def test_triton_row_argmax_equals_the_reference(vocab, block_v):
    rows = _rows(vocab)
    assert torch.equal(row_argmax_triton(rows, block_v=block_v), row_argmax_reference(rows))


def test_triton_row_argmax_reads_strided_and_batched_rows():
    rows = _rows(64)
    strided = rows[:, ::2]  # stride 2 along the vocabulary
    assert torch.equal(row_argmax_triton(strided), row_argmax_reference(strided))
    batched = torch.stack([rows, rows.flip(0)])  # [2, 10, V]: the output keeps the leading dims
    expected = row_argmax_reference(batched.reshape(-1, 64)).view(2, 10)
    assert torch.equal(row_argmax_triton(batched), expected)


def test_triton_row_argmax_of_an_empty_batch():
    assert row_argmax_triton(torch.empty(0, 5)).shape == (0,)


def test_the_comparison_can_fail():
    """Negative control: a row whose maximum moved is told apart."""
    rows = _rows(37)
    moved = rows.clone()
    moved[0, 0] = 99.0
    assert not torch.equal(row_argmax_triton(moved), row_argmax_reference(rows))
