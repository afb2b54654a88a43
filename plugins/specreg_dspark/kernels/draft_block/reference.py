"""The plain per-row rule of the draft block: the test oracle for `build_draft_block`."""

from __future__ import annotations

import torch


def build_draft_block_reference(
    anchor: torch.Tensor, anchor_positions: torch.Tensor, width: int, mask_token_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Per request: ids ``[anchor, MASK, ..., MASK]`` and positions ``anchor_pos + k`` for k in
    ``[0, width)``, both int64 [b, width]."""
    ids, positions = [], []
    for token, start in zip(anchor.tolist(), anchor_positions.tolist(), strict=True):
        row_ids, row_positions = [], []
        for k in range(width):
            row_ids.append(token if k == 0 else mask_token_id)
            row_positions.append(start + k)
        ids.append(row_ids)
        positions.append(row_positions)
    shape = (len(ids), width)
    return (
        torch.tensor(ids, dtype=torch.int64).reshape(shape),
        torch.tensor(positions, dtype=torch.int64).reshape(shape),
    )
