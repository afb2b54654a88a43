"""The draft block in Triton (the GPU path): one program per request writes its ids, positions."""

from __future__ import annotations

import torch

from specreg.kernels.triton_shim import tl, triton

if triton is not None:

    @triton.jit
    def _draft_block_kernel(
        anchor_ptr, pos_ptr, ids_out_ptr, pos_out_ptr, width, mask_token_id, BLOCK_W: tl.constexpr
    ):
        row = tl.program_id(0).to(tl.int64)
        cols = tl.arange(0, BLOCK_W)
        in_row = cols < width
        anchor = tl.load(anchor_ptr + row).to(tl.int64)
        start = tl.load(pos_ptr + row).to(tl.int64)
        ids = tl.where(cols == 0, anchor, tl.full([BLOCK_W], mask_token_id, tl.int64))
        offs = row * width + cols
        tl.store(ids_out_ptr + offs, ids, mask=in_row)
        tl.store(pos_out_ptr + offs, start + cols.to(tl.int64), mask=in_row)


def build_draft_block_triton(
    anchor: torch.Tensor, anchor_positions: torch.Tensor, width: int, mask_token_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Triton version of `build_draft_block_torch` (inputs validated and contiguous)."""
    b = anchor.shape[0]
    ids = torch.empty((b, width), dtype=torch.int64, device=anchor.device)
    positions = torch.empty((b, width), dtype=torch.int64, device=anchor.device)
    if b:
        block_w = max(16, triton.next_power_of_2(width))
        _draft_block_kernel[(b,)](
            anchor, anchor_positions, ids, positions, width, mask_token_id, BLOCK_W=block_w
        )
    return ids, positions
