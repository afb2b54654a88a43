"""Plain reference of the pivot search (the test oracle): sort the row, keep the prefix >= L."""

from __future__ import annotations

import torch


def prefix_reference(row: torch.Tensor, pivot: float) -> list[float]:
    """The elements of `row` [V] that are >= `pivot`, largest first (what
    `torch_impl.pivot_prefix` returns for the row before its -inf padding)."""
    return sorted((float(v) for v in row.tolist() if float(v) >= pivot), reverse=True)
