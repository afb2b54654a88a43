"""The draft forward's input ``[anchor, MASK, ...]`` and its positions: validation, dispatch.

Dense layout: width gamma, slot k predicts the token at anchor position + k + 1. Bonus-anchor
layout: width gamma + 1, slot 0 only conditions. Both use positions ``anchor_pos + k``: the first
``width`` columns of the verify window.

- `reference.build_draft_block_reference`: the plain per-row rule (test oracle).
- `torch_impl.build_draft_block_torch`: the CPU path.
- `triton_impl.build_draft_block_triton`: the GPU path (one program per request).
"""

from __future__ import annotations

import torch

from specreg.backend import select_backend
from specreg.errors import KernelInputError, problem
from specreg.integers import require_int
from specreg.kernels.checks import (
    INDEX_DTYPES,
    check_dtype,
    check_index_range,
    check_same_device,
    check_shape,
    should_check_values,
)
from specreg_dspark.kernels.draft_block.torch_impl import build_draft_block_torch

__all__ = ["build_draft_block"]


def build_draft_block(
    anchor: torch.Tensor,
    anchor_positions: torch.Tensor,
    *,
    width: int,
    mask_token_id: int,
    vocab_size: int | None = None,
    check_values: bool | None = None,
    backend: str | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """The draft forward's input ids and positions, both int64 [b, width].

    `anchor` [b]: the last accepted (bonus) token of each request; `anchor_positions` [b]: its
    position. `width` = gamma (dense) or gamma + 1 (bonus-anchor), or the DFlash block size.
    `backend`: 'auto' | 'torch' | 'triton', or None (SPECREG_KERNEL_BACKEND).
    """
    check_shape("anchor", anchor, (None,))
    check_shape("anchor_positions", anchor_positions, (anchor.shape[0],))
    check_dtype("anchor", anchor, INDEX_DTYPES)
    check_dtype("anchor_positions", anchor_positions, INDEX_DTYPES)
    check_same_device(anchor=anchor, anchor_positions=anchor_positions)
    for name, value, low in (("width", width, 1), ("mask_token_id", mask_token_id, 0)):
        fix = f"pass {name} from the resolved plan (plan.verifier.runtime)"
        require_int(name, value, low=low, fix=fix)
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
    if select_backend(anchor, requested=backend) == "triton":
        from specreg_dspark.kernels.draft_block.triton_impl import build_draft_block_triton

        return build_draft_block_triton(
            anchor.contiguous(), anchor_positions.contiguous(), width, mask_token_id
        )
    return build_draft_block_torch(anchor, anchor_positions, width, mask_token_id)
