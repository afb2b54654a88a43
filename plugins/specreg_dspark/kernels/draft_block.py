"""The draft block input ``[anchor, MASK, MASK, ...]`` and its positions.

Dense layout: width gamma, slot k predicts the token at anchor position + k + 1. Bonus-anchor
layout: width gamma + 1, slot 0 only conditions. Both use positions ``anchor_pos + k``: the first
``width`` columns of the verify window.
"""

from __future__ import annotations

import torch

from specreg.backend import select_backend
from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import (
    INDEX_DTYPES,
    check_dtype,
    check_index_range,
    check_same_device,
    check_shape,
    should_check_values,
)

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is optional
    triton = None


def build_draft_block_torch(
    anchor: torch.Tensor, anchor_positions: torch.Tensor, width: int, mask_token_id: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """Torch reference: ids [b, width] (column 0 = anchor, rest mask), positions [b, width]."""
    b = anchor.shape[0]
    ids = torch.full((b, width), mask_token_id, dtype=torch.int64, device=anchor.device)
    ids[:, 0] = anchor.to(torch.int64)
    cols = torch.arange(width, dtype=torch.int64, device=anchor.device)
    positions = anchor_positions.to(torch.int64)[:, None] + cols[None, :]
    return ids, positions


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
    """Triton version of `build_draft_block_torch` (one program per request)."""
    b = anchor.shape[0]
    ids = torch.empty((b, width), dtype=torch.int64, device=anchor.device)
    positions = torch.empty((b, width), dtype=torch.int64, device=anchor.device)
    if b:
        block_w = max(16, triton.next_power_of_2(width))
        _draft_block_kernel[(b,)](
            anchor, anchor_positions, ids, positions, width, mask_token_id, BLOCK_W=block_w
        )
    return ids, positions


def build_draft_block(
    anchor: torch.Tensor,
    anchor_positions: torch.Tensor,
    *,
    width: int,
    mask_token_id: int,
    vocab_size: int | None = None,
    check_values: bool | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The draft forward's input ids and positions, both int64 [b, width].

    `anchor` [b]: the last accepted (bonus) token of each request; `anchor_positions` [b]: its
    position. `width` = gamma (dense) or gamma + 1 (bonus-anchor), or the DFlash block size.
    """
    check_shape("anchor", anchor, (None,))
    check_shape("anchor_positions", anchor_positions, (anchor.shape[0],))
    check_dtype("anchor", anchor, INDEX_DTYPES)
    check_dtype("anchor_positions", anchor_positions, INDEX_DTYPES)
    check_same_device(anchor=anchor, anchor_positions=anchor_positions)
    for name, value, low in (("width", width, 1), ("mask_token_id", mask_token_id, 0)):
        if not isinstance(value, int) or isinstance(value, bool) or value < low:
            raise KernelInputError(
                problem(
                    "SR904",
                    f"{name}={value!r} is invalid",
                    accepted=f"an integer >= {low}",
                    fix=f"pass {name} from the resolved plan (plan.verifier.runtime)",
                    field=name,
                )
            )
    if vocab_size is not None and mask_token_id >= vocab_size:
        raise KernelInputError(
            problem(
                "SR903",
                f"mask_token_id={mask_token_id} is outside the vocab size {vocab_size}",
                accepted=f"mask_token_id in [0, {vocab_size})",
                fix="pass the draft checkpoint's mask token id",
                field="mask_token_id",
            )
        )
    if should_check_values(anchor.device, check_values):
        check_index_range("anchor", anchor, 0, vocab_size if vocab_size is not None else 2**62)
        check_index_range("anchor_positions", anchor_positions, 0, 2**62)
    if select_backend(anchor) == "triton":
        return build_draft_block_triton(
            anchor.contiguous(), anchor_positions.contiguous(), width, mask_token_id
        )
    return build_draft_block_torch(anchor, anchor_positions, width, mask_token_id)
