"""The plain per-row argmax rule, one element at a time: the test oracle for `row_argmax`."""

from __future__ import annotations

import math

import torch


def row_argmax_reference(rows: torch.Tensor) -> torch.Tensor:
    """Per row of `rows` [R, V]: the first index of a NaN if the row holds one, else the first
    index whose value is not below any other (-0.0 equals 0.0; an all -inf row gives 0)."""
    out = []
    for row in rows.to(torch.float64).tolist():
        best = 0
        for index, value in enumerate(row):
            if math.isnan(value):
                best = index
                break
            if value > row[best]:
                best = index
        out.append(best)
    return torch.tensor(out, dtype=torch.int64)
