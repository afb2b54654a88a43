"""`verify_tree_greedy`: the longest root path of each tree that the target's argmax accepts.

Validates the inputs, picks the backend and dispatches: on CPU from logits the walk that
argmaxes only the rows it reaches (`torch_impl.verify_tree_greedy_from_logits_torch`),
otherwise the walk on every node's argmax (torch, or Triton with `row_argmax_triton`).
`reference` holds the plain rule the tests hold every path to. For the tree sampling family the
entry also exports `assemble_result` and, imported on first use, the Triton launcher, its
output helpers (`triton_outputs`, `triton_result`) and the walk's device functions
(`walk_step`, `write_bonus`).
"""

from __future__ import annotations

from typing import Any

import torch

from specreg.backend import select_backend
from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    INDEX_DTYPES,
    check_dtype,
    check_same_device,
    check_shape,
    should_check_values,
)
from specreg.kernels.tree_lengths import cut_below
from specreg.kernels.tree_verify_greedy.checks import (
    check_tree_inputs,
    check_tree_values,
    verify_tile,
)
from specreg.kernels.tree_verify_greedy.torch_impl import (
    assemble_result,
    verify_tree_greedy_from_logits_torch,
    verify_tree_greedy_torch,
)
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult

#: The Triton path's names, imported from `triton_impl` on first use (it imports Triton): the
#: launcher and output helpers, and the walk's device functions the sampling kernel fuses.
_TRITON_NAMES = (
    "triton_outputs", "triton_result", "verify_tree_greedy_triton", "walk_step", "write_bonus",
)

__all__ = ["assemble_result", "verify_tree_greedy", "verify_tree_greedy_torch", *_TRITON_NAMES]


def verify_tree_greedy(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    *,
    depth: int,
    target_logits: torch.Tensor | None = None,
    target_predict: torch.Tensor | None = None,
    check_values: bool | None = None,
    block_v: int | None = None,
    backend: str | None = None,
    draft_lengths: Any = None,
) -> TreeVerifyResult:
    """Greedy tree verification (see `reference` for the rule).

    Give exactly one of `target_logits` [b, N, V] (any float dtype; argmax per node, ties to the
    lowest index) or `target_predict` [b, N] (the argmax already computed). `depth` = num_steps.
    `backend`: 'auto' | 'torch' | 'triton' | None (None reads SPECREG_KERNEL_BACKEND).
    `draft_lengths` [b] (0..depth; `specreg.step.draft_lengths`): request r walks only the nodes at
    depth <= draft_lengths[r] (0: the root alone, the bonus is the root's argmax).
    """
    b, n = check_tree_inputs(
        candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, depth
    )
    if (target_logits is None) == (target_predict is None):
        raise KernelInputError(
            problem("SR900", "give exactly one of target_logits and target_predict",
                    accepted="target_logits [b, N, V] or target_predict [b, N]",
                    fix="pass one of the two", field="target_logits")
        )
    vocab = None
    if target_logits is not None:
        check_shape("target_logits", target_logits, (b, n, None))
        check_dtype("target_logits", target_logits, FLOAT_DTYPES)
        vocab = target_logits.shape[2]
        if vocab < 1:
            raise KernelInputError(
                problem("SR900", "target_logits has an empty vocab", accepted="V >= 1",
                        fix="pass the logits over the whole vocab", field="target_logits")
            )
    else:
        check_shape("target_predict", target_predict, (b, n))
        check_dtype("target_predict", target_predict, INDEX_DTYPES)
    device = check_same_device(
        candidates=candidates, retrieve_index=retrieve_index,
        retrieve_next_token=retrieve_next_token, retrieve_next_sibling=retrieve_next_sibling,
        target_logits=target_logits, target_predict=target_predict,
    )
    retrieve_next_token = cut_below(
        retrieve_next_token, retrieve_next_sibling, draft_lengths, depth=depth,
        check_values=check_values,
    )
    # The CPU default from logits on the torch path checks only the rows the walk reaches, as it
    # reads them (their argmax points at a NaN): every other value check runs here.
    check_reads = (
        target_logits is not None and check_values is None and device.type == "cpu"
        and _torch_backend(candidates, backend)
    )
    if should_check_values(device, check_values):
        check_tree_values(
            candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, vocab
        )
        if target_logits is not None and not check_reads and bool(
            torch.isnan(target_logits).any()
        ):
            raise KernelInputError(
                problem("SR904", "target_logits holds NaN", accepted="finite or -inf logits",
                        fix="check the target forward", field="target_logits")
            )
    args = (candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling)
    if select_backend(candidates, requested=backend) == "triton":
        from specreg.kernels.argmax import row_argmax_triton
        from specreg.kernels.tree_verify_greedy.triton_impl import verify_tree_greedy_triton

        if target_predict is None:
            target_predict = row_argmax_triton(
                target_logits, block_v=verify_tile(target_logits.shape[-1], block_v)
            )
        return verify_tree_greedy_triton(*args, target_predict, depth=depth)
    if target_logits is not None and device.type == "cpu":
        if check_reads:
            return verify_tree_greedy_from_logits_torch(
                *args, target_logits, depth=depth, check_reads=True
            )
        return verify_tree_greedy_from_logits_torch(*args, target_logits, depth=depth)
    if target_logits is not None:
        target_predict = torch.argmax(target_logits, dim=-1)
    return verify_tree_greedy_torch(*args, target_predict, depth=depth)


def _torch_backend(candidates: torch.Tensor, backend: str | None) -> bool:
    """Whether the call runs the torch path (a bad `backend` reads False: the SR116 is raised
    after the value checks, as it always was)."""
    try:
        return select_backend(candidates, requested=backend) == "torch"
    except KernelInputError:
        return False


def __getattr__(name: str) -> Any:
    """The Triton path's names (`_TRITON_NAMES`; the device functions exist only where Triton
    is installed)."""
    if name in _TRITON_NAMES:
        from specreg.kernels.tree_verify_greedy import triton_impl

        return getattr(triton_impl, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
