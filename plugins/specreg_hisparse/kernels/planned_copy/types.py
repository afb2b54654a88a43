"""The values of the planned-copy family: `PlannedCopy`, the one input bundle its kernels take.

Imports no torch at run time.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import attrs

if TYPE_CHECKING:
    import torch


@attrs.define(kw_only=True, eq=False)
class PlannedCopy:
    """Copy host rows ``miss_src[b, :miss_count[b]]`` to device rows ``miss_dst[b, ...]`` for the
    real rows ``b < num_real``.

    `miss_src` int64 / `miss_dst` int32 ``[bs, >= count]`` with one row stride, `miss_count`
    int32 ``[bs]``, `num_real` int32 ``[1]`` on the plan's device (`num_real_int` the same count
    as an int when known: no sync). `host_cache` (may be pinned host memory) and `device_buffer`
    are contiguous ``[rows, ...]`` tensors with rows of the same byte size.
    """

    miss_src: torch.Tensor
    miss_dst: torch.Tensor
    miss_count: torch.Tensor
    num_real: torch.Tensor
    host_cache: torch.Tensor
    device_buffer: torch.Tensor
    num_real_int: int | None = None

    def real_rows(self) -> int:
        """The number of real rows as an int (reads the device tensor when not known)."""
        if self.num_real_int is not None:
            return self.num_real_int
        return int(self.num_real.item())
