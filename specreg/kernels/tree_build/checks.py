"""Input validation of `build_tree`: shapes, dtypes and devices always, index ranges on demand."""

from __future__ import annotations

import torch

from specreg.errors import KernelInputError, problem
from specreg.integers import require_int
from specreg.kernels.checks import (
    INDEX_DTYPES,
    check_dtype,
    check_index_range,
    check_same_device,
    check_shape,
)
from specreg.kernels.tree_build.types import TreeBuildInputs
from specreg.contract.tree_sizes import MASK_MODES, MAX_BITPACKED_NODES, num_draft_ids


def invalid_tree(message: str) -> KernelInputError:
    """SR210: a kept draft without a kept parent within `depth` of the root."""
    return KernelInputError(
        problem(
            "SR210",
            message,
            accepted="every kept draft's parent kept too, each draft within `depth` of the root",
            fix="check the draft scores for NaN and pass the parent_list of the same step",
            field="top_scores_index",
        )
    )


def check_build_tree(inputs: TreeBuildInputs) -> None:
    """SR211 / SR212 / SR904 on the sizes and mode, SR900-SR902 on the tensors."""
    mask_mode, n = inputs.mask_mode, inputs.num_verify_tokens
    if mask_mode not in MASK_MODES:
        raise KernelInputError(
            problem(
                "SR211",
                f"tree mask mode {mask_mode!r} is not known",
                accepted=", ".join(MASK_MODES),
                fix="pass one of the accepted modes",
                field="mask_mode",
            )
        )
    for name in ("topk", "depth", "num_verify_tokens"):
        require_int(name, getattr(inputs, name), low=1, fix=f"pass {name} as a positive int")
    if mask_mode == "qlen_only_bitpacking" and n > MAX_BITPACKED_NODES:
        raise KernelInputError(
            problem(
                "SR212",
                f"num_verify_tokens={n} does not fit a 32-bit packed mask row",
                accepted=f"num_verify_tokens <= {MAX_BITPACKED_NODES} for qlen_only_bitpacking",
                fix="use mask_mode='qlen_only' or 'full'",
                field="mask_mode",
            )
        )
    check_shape("bonus_tokens", inputs.bonus_tokens, (None,))
    batch = inputs.bonus_tokens.shape[0]
    topk, depth = inputs.topk, inputs.depth
    parents_width = topk * (depth - 1) + 1 if depth > 1 else 0
    tensors = {
        "bonus_tokens": inputs.bonus_tokens,
        "parent_list": inputs.parent_list,
        "top_scores_index": inputs.top_scores_index,
        "draft_tokens": inputs.draft_tokens,
        "seq_lens": inputs.seq_lens,
    }
    check_shape("parent_list", inputs.parent_list, (batch, parents_width))
    check_shape("top_scores_index", inputs.top_scores_index, (batch, n - 1))
    check_shape("draft_tokens", inputs.draft_tokens, (batch, n - 1))
    check_shape("seq_lens", inputs.seq_lens, (batch,))
    for name, tensor in tensors.items():
        check_dtype(name, tensor, INDEX_DTYPES)
    check_same_device(**tensors)


def check_build_tree_values(inputs: TreeBuildInputs) -> None:
    """SR903 on the draft ids, parents and prefix lengths (reads the data)."""
    ids = num_draft_ids(inputs.topk, inputs.depth)
    check_index_range("top_scores_index", inputs.top_scores_index, 0, ids)
    check_index_range("parent_list", inputs.parent_list, -1, ids)
    check_index_range("seq_lens", inputs.seq_lens, 0, 2**62)


def first_invalid(ok: torch.Tensor) -> tuple[int, int]:
    """(request, node) of the first False in `ok` [b, N]."""
    r, t = (int(v) for v in (~ok).nonzero()[0])
    return r, t
