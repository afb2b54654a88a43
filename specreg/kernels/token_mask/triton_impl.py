"""Triton implementation of the grammar bitmask: one program per (row, vocabulary tile).

Each program loads the tile's words (one int32 per 32 tokens), tests each token's bit and
stores the fill value only where the token is disallowed; offsets are int64.
"""

from __future__ import annotations

import torch

from specreg.kernels.triton_shim import tl, triton, vocab_tile

if triton is not None:

    @triton.jit
    def _apply_bitmask_kernel(
        scores_ptr, stride_r, stride_v, words_ptr, stride_wr, vocab, fill,
        BLOCK_V: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.program_id(1).to(tl.int64) * BLOCK_V + tl.arange(0, BLOCK_V).to(tl.int64)
        inside = cols < vocab
        word = tl.load(words_ptr + row * stride_wr + cols // 32, mask=inside, other=-1)
        allowed = ((word >> (cols % 32).to(tl.int32)) & 1) != 0
        target = scores_ptr + row * stride_r + cols * stride_v
        tl.store(target, tl.full([BLOCK_V], fill, tl.float32).to(scores_ptr.dtype.element_ty),
                 mask=inside & ~allowed)


def apply_bitmask_triton(
    scores: torch.Tensor, words: torch.Tensor, *, fill: float, block_v: int | None = None
) -> None:
    """As `apply_bitmask_torch`, on CUDA tensors or under the interpreter."""
    rows, vocab = scores.shape
    if not rows:
        return
    block = vocab_tile(vocab, block_v)
    grid = (rows, triton.cdiv(vocab, block))
    _apply_bitmask_kernel[grid](
        scores, scores.stride(0), scores.stride(1), words, words.stride(0), vocab, fill,
        BLOCK_V=block,
    )
