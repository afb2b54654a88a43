"""Row argmax in Triton: one program per row, the vocabulary streamed in BLOCK_V tiles.

Ties go to the lowest index and an all -inf row gives 0, as `torch.argmax`; NaN is not given
its torch meaning (callers reject NaN before they launch). `row_argmax_tiles` is the device
function a fused kernel calls on one row; `row_argmax_triton` launches it over every row.
"""

from __future__ import annotations

import torch

from specreg.kernels.triton_shim import tl, triton, vocab_tile

if triton is not None:

    @triton.jit
    def row_argmax_tiles(row_ptr, stride_v, vocab, BLOCK_V: tl.constexpr):
        """Argmax of one row streamed in tiles; ties go to the lowest index. Returns int64."""
        offs = tl.arange(0, BLOCK_V)
        best_val = tl.max(tl.full([BLOCK_V], float("-inf"), tl.float32), axis=0)
        best_idx = tl.min(tl.zeros([BLOCK_V], tl.int64), axis=0)
        for start in range(0, vocab, BLOCK_V):
            cols = start + offs
            inside = cols < vocab
            values = tl.load(
                row_ptr + cols.to(tl.int64) * stride_v, mask=inside, other=float("-inf")
            ).to(tl.float32)
            tile_max = tl.max(values, axis=0)
            tile_idx = tl.min(
                tl.where(inside & (values == tile_max), cols, vocab), axis=0
            ).to(tl.int64)
            better = tile_max > best_val
            best_val = tl.where(better, tile_max, best_val)
            best_idx = tl.where(better, tile_idx, best_idx)
        return best_idx

    @triton.jit
    def _row_argmax_kernel(rows_ptr, out_ptr, vocab, stride_r, stride_v, BLOCK_V: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        best = row_argmax_tiles(rows_ptr + row * stride_r, stride_v, vocab, BLOCK_V)
        tl.store(out_ptr + row, best)


def row_argmax_triton(rows: torch.Tensor, *, block_v: int | None = None) -> torch.Tensor:
    """int64 [...]: the index of each row's maximum over the last dim of `rows` [..., V]
    (V >= 1); `block_v` as `vocab_tile` takes it."""
    vocab = rows.shape[-1]
    flat = rows.reshape(-1, vocab)  # a view for the usual layouts
    out = torch.empty(flat.shape[0], dtype=torch.int64, device=rows.device)
    if flat.shape[0] > 0:
        _row_argmax_kernel[(flat.shape[0],)](
            flat, out, vocab, flat.stride(0), flat.stride(1), BLOCK_V=vocab_tile(vocab, block_v)
        )
    return out.view(rows.shape[:-1])
