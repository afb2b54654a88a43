"""How the tree verifier reports: a tree kernel's result, or a chain's, as the plan's
`VerifyResult`, and the positions a tree's draws default to."""

from __future__ import annotations

from typing import Any

import torch

from specreg.contract.protocols import VerifyResult
from specreg.kernels.tree_build.types import TreeBuildResult
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult


def default_positions(tree: TreeBuildResult, b: int, n: int, kwargs: dict[str, Any]) -> None:
    """`positions` (when the caller gave none): the absolute position of each tree's depth-1
    nodes, its root's position + 1 (`tree.positions` is seq_len + depth)."""
    if kwargs.get("positions") is None:
        kwargs["positions"] = tree.positions.view(b, n)[:, 0].to(torch.int64) + 1


def chain_to_tree_result(chain: object, num_steps: int) -> TreeVerifyResult:
    """A `ChainVerifyResult` of a chain of n = num_steps + 1 nodes as a `TreeVerifyResult`."""
    out = chain.output_tokens.to(torch.int64)
    b, n = out.shape
    slots = num_steps + 1
    if n < slots:
        out = torch.cat([out, out.new_full((b, slots - n), -1)], 1)
    out = out[:, :slots]
    count = chain.accept_len.to(torch.int64)
    k = torch.arange(slots, device=out.device).unsqueeze(0)
    rows = torch.arange(b, device=out.device).unsqueeze(1) * n
    accept_index = torch.where(k <= count.unsqueeze(1), rows + k, torch.full_like(out, -1))
    predicts = torch.full((b * n,), -1, dtype=torch.int64, device=out.device)
    on = accept_index >= 0
    predicts[accept_index[on]] = out[on]
    return TreeVerifyResult(
        predicts=predicts, accept_index=accept_index,
        accept_token_num=chain.accept_len.to(torch.int32), bonus=chain.bonus.to(torch.int64),
        output_tokens=out,
    )


def as_result(found: TreeVerifyResult, width: int, acceptance: str = "lossless") -> VerifyResult:
    """`acceptance`: the lossy rule that produced `found` ('lossless' otherwise; SR199 reads it)."""
    return VerifyResult(
        num_accepted=found.accept_token_num, output_tokens=found.output_tokens,
        bonus=found.bonus, width=width, accepted_index=found.accept_index,
        predicts=found.predicts, param_error=found.param_error, acceptance=acceptance,
    )
