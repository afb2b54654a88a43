"""The plain rule of the planned copy, row by row and entry by entry: the oracle of the tests.

For every real batch row ``b < num_real`` and every entry ``j < miss_count[b]``, the bytes of host
row ``miss_src[b, j]`` are copied to device row ``miss_dst[b, j]``; padding rows and entries past
the count copy nothing. Used by tests only.
"""

from __future__ import annotations

import torch

from specreg_hisparse.kernels.planned_copy.types import PlannedCopy


def planned_rows_reference(copy: PlannedCopy) -> list[tuple[int, int]]:
    """The (host row, device row) pairs the plan copies, in row-major order."""
    pairs = []
    for b in range(min(copy.real_rows(), copy.miss_count.shape[0])):
        count = max(0, min(int(copy.miss_count[b]), copy.miss_src.shape[1]))
        for j in range(count):
            pairs.append((int(copy.miss_src[b, j]), int(copy.miss_dst[b, j])))
    return pairs


def copy_planned_reference(copy: PlannedCopy) -> None:
    """Copy every planned row, one row at a time, as raw bytes."""
    host = copy.host_cache.reshape(copy.host_cache.shape[0], -1).view(torch.uint8)
    dev = copy.device_buffer.reshape(copy.device_buffer.shape[0], -1).view(torch.uint8)
    for src, dst in planned_rows_reference(copy):
        dev[dst] = host[src].to(dev.device)
