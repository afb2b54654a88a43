"""The fused greedy Markov step in Triton (the GPU path): one pass over W2 in vocab tiles.

Each program of the first kernel takes a tile of ``BLOCK_V`` vocab rows and a block of requests,
accumulates the tile's bias in float32 (``tl.dot`` over rank chunks), adds the base logits and
keeps the tile's max and argmax; the second kernel combines the tiles. Ties go to the lowest index,
as with ``torch.argmax`` (first tile wins, first lane within a tile). The bias never exists as a
``[b, V]`` tensor.
"""

from __future__ import annotations

import torch

from specreg.kernels.triton_shim import tl, triton

if triton is not None:

    @triton.jit
    def _markov_greedy_tiles_kernel(
        base_ptr,
        prev_ptr,
        w1_ptr,
        w2_ptr,
        tile_val_ptr,
        tile_idx_ptr,
        batch,
        vocab,
        rank,
        base_stride,
        num_tiles,
        BLOCK_V: tl.constexpr,
        BLOCK_R: tl.constexpr,
        BLOCK_B: tl.constexpr,
        IEEE: tl.constexpr,
    ):
        pid_v = tl.program_id(0)
        pid_b = tl.program_id(1)
        offs_v = pid_v.to(tl.int64) * BLOCK_V + tl.arange(0, BLOCK_V).to(tl.int64)
        offs_b = pid_b.to(tl.int64) * BLOCK_B + tl.arange(0, BLOCK_B).to(tl.int64)
        in_v = offs_v < vocab
        in_b = offs_b < batch
        prev = tl.load(prev_ptr + offs_b, mask=in_b, other=0).to(tl.int64)
        acc = tl.zeros([BLOCK_V, BLOCK_B], dtype=tl.float32)
        for r0 in range(0, rank, BLOCK_R):
            offs_r = r0 + tl.arange(0, BLOCK_R).to(tl.int64)
            in_r = offs_r < rank
            w2_tile = tl.load(
                w2_ptr + offs_v[:, None] * rank + offs_r[None, :],
                mask=in_v[:, None] & in_r[None, :],
                other=0.0,
            )
            embed = tl.load(
                w1_ptr + prev[None, :] * rank + offs_r[:, None],
                mask=in_r[:, None] & in_b[None, :],
                other=0.0,
            )
            if IEEE:
                acc += tl.dot(w2_tile, embed, input_precision="ieee")
            else:
                acc += tl.dot(w2_tile, embed)
        base = tl.load(
            base_ptr + offs_b[None, :] * base_stride + offs_v[:, None],
            mask=in_v[:, None] & in_b[None, :],
            other=float("-inf"),
        ).to(tl.float32)
        scores = tl.where(in_v[:, None], acc + base, float("-inf"))
        best = tl.max(scores, axis=0)
        arg = tl.argmax(scores, axis=0, tie_break_left=True).to(tl.int64)
        out = offs_b * num_tiles + pid_v
        tl.store(tile_val_ptr + out, best, mask=in_b)
        tl.store(tile_idx_ptr + out, pid_v.to(tl.int64) * BLOCK_V + arg, mask=in_b)

    @triton.jit
    def _markov_greedy_combine_kernel(
        tile_val_ptr, tile_idx_ptr, out_ptr, num_tiles, BLOCK_T: tl.constexpr
    ):
        row = tl.program_id(0).to(tl.int64)
        lanes = tl.arange(0, BLOCK_T)
        best = tl.full([], float("-inf"), tl.float32)
        best_idx = tl.full([], 0, tl.int64)
        for t0 in range(0, num_tiles, BLOCK_T):
            offs = t0 + lanes
            valid = offs < num_tiles
            vals = tl.load(tile_val_ptr + row * num_tiles + offs, mask=valid, other=float("-inf"))
            idxs = tl.load(tile_idx_ptr + row * num_tiles + offs, mask=valid, other=0)
            chunk_best = tl.max(vals, axis=0)
            chunk_arg = tl.argmax(vals, axis=0, tie_break_left=True)
            chunk_idx = tl.sum(tl.where(lanes == chunk_arg, idxs, 0), axis=0)
            take = chunk_best > best
            best_idx = tl.where(take, chunk_idx, best_idx)
            best = tl.where(take, chunk_best, best)
        tl.store(out_ptr + row, best_idx)


def markov_greedy_step_triton(
    base_logits: torch.Tensor,
    prev_tokens: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    *,
    block_v: int,
    block_r: int = 64,
) -> torch.Tensor:
    """Greedy token per request, int64 [b] (inputs validated; `w1`, `w2` contiguous, same dtype;
    `block_v` from `vocab_tile`)."""
    b, vocab = base_logits.shape
    rank = w1.shape[1]
    out = torch.zeros(b, dtype=torch.int64, device=base_logits.device)
    if b == 0:
        return out
    block_b = min(64, max(16, triton.next_power_of_2(b)))
    block_r = max(16, min(block_r, triton.next_power_of_2(rank)))
    num_tiles = triton.cdiv(vocab, block_v)
    tile_val = torch.empty((b, num_tiles), dtype=torch.float32, device=base_logits.device)
    tile_idx = torch.empty((b, num_tiles), dtype=torch.int64, device=base_logits.device)
    grid = (num_tiles, triton.cdiv(b, block_b))
    _markov_greedy_tiles_kernel[grid](
        base_logits,
        prev_tokens,
        w1,
        w2,
        tile_val,
        tile_idx,
        b,
        vocab,
        rank,
        base_logits.stride(0),
        num_tiles,
        BLOCK_V=block_v,
        BLOCK_R=block_r,
        BLOCK_B=block_b,
        IEEE=w2.dtype == torch.float32,
    )
    block_t = min(1024, max(16, triton.next_power_of_2(num_tiles)))
    _markov_greedy_combine_kernel[(b,)](tile_val, tile_idx, out, num_tiles, BLOCK_T=block_t)
    return out
