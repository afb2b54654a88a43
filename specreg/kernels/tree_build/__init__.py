"""`build_tree`: the verify tree (mask, positions, links, tokens) of b draft trees.

The kept drafts are named by their draft global ids (`specreg.contract.tree_sizes`): EAGLE's
draft loop and Medusa's static trees both number them so. Validates the inputs, picks the
backend and dispatches to `torch_impl.build_tree_torch` (CPU) or `triton_impl.build_tree_triton`
(one program per request); `reference.build_tree_reference` is the plain per-request rule the
tests hold both to.
"""

from __future__ import annotations

import torch

from specreg.backend import select_backend
from specreg.kernels.checks import should_check_values
from specreg.kernels.tree_build.checks import (
    check_build_tree,
    check_build_tree_values,
    first_invalid,
    invalid_tree,
)
from specreg.kernels.tree_build.torch_impl import build_tree_torch, tree_ok_torch
from specreg.kernels.tree_build.types import TreeBuildInputs, TreeBuildResult


def build_tree(
    bonus_tokens: torch.Tensor,
    parent_list: torch.Tensor,
    top_scores_index: torch.Tensor,
    draft_tokens: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    topk: int,
    depth: int,
    num_verify_tokens: int,
    mask_mode: str = "full",
    seq_lens_sum: int | None = None,
    fill_prefix_mask: bool = True,
    check_values: bool | None = None,
    backend: str | None = None,
) -> TreeBuildResult:
    """Build the verify tree of b requests (see `TreeBuildResult` for the outputs).

    Inputs: `bonus_tokens` [b] (the root of each tree), `parent_list` [b, K*(S-1)+1] ([b, 0] for
    depth 1), `top_scores_index` [b, N-1] and `draft_tokens` [b, N-1] from
    `organize_draft_results`, `seq_lens` [b] (prefix lengths without drafts); all int32/int64 on
    one device. `depth` = S bounds every ancestor walk. Shapes, dtypes and devices are checked
    always; index ranges and tree validity (SR903, SR210) on CPU, or on GPU with
    `check_values=True` (which synchronises). Pass `seq_lens_sum` with `mask_mode='full'` on GPU
    to avoid a synchronisation for the mask size. `backend`: 'auto' | 'torch' | 'triton' | None
    (None reads SPECREG_KERNEL_BACKEND).
    """
    inputs = TreeBuildInputs(
        bonus_tokens, parent_list, top_scores_index, draft_tokens, seq_lens,
        topk=topk, depth=depth, num_verify_tokens=num_verify_tokens, mask_mode=mask_mode,
        seq_lens_sum=seq_lens_sum, fill_prefix_mask=fill_prefix_mask,
    )
    check_build_tree(inputs)
    checking = should_check_values(bonus_tokens.device, check_values)
    if checking:
        check_build_tree_values(inputs)
    if select_backend(bonus_tokens, requested=backend) == "triton":
        from specreg.kernels.tree_build.triton_impl import build_tree_triton

        if checking:
            ok = tree_ok_torch(inputs)
            if not bool(ok.all()):
                r, t = first_invalid(ok)
                raise invalid_tree(
                    f"request {r}: tree node {t} has no kept parent within depth {depth}"
                )
        return build_tree_triton(inputs)
    return build_tree_torch(inputs)
