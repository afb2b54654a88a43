"""The draft block in torch (the CPU path): ids ``[anchor, MASK, ...]`` and positions."""

from __future__ import annotations

import torch


def build_draft_block_torch(
    anchor: torch.Tensor, anchor_positions: torch.Tensor, width: int, mask_token_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """ids [b, width] (column 0 = anchor, rest mask), positions [b, width] = anchor_pos + k."""
    b = anchor.shape[0]
    ids = torch.full((b, width), mask_token_id, dtype=torch.int64, device=anchor.device)
    ids[:, 0] = anchor.to(torch.int64)
    cols = torch.arange(width, dtype=torch.int64, device=anchor.device)
    positions = anchor_positions.to(torch.int64)[:, None] + cols[None, :]
    return ids, positions
