"""The planned copy: replay a recorded miss plan into a layer's host cache and device buffer.

`copy_cache_planned` is the public wrapper: it validates the plan and the buffers, picks the
backend (`specreg.backend.select_backend`, `backend=` as requested) and dispatches to
`torch_impl` or `triton_impl`. Value checks (counts and rows in range) sync, so they run on CPU
or with `check_values=True` and then take the flattened rows the torch path copies. The swap
family copies a call's misses with the unchecked copies exported here (`copy_rows_torch`,
`copy_planned_triton`), right after its own kernel planned them.
"""

from __future__ import annotations

import torch

from specreg.backend import select_backend
from specreg.kernels.checks import check_index_range, check_same_device, should_check_values
from specreg_hisparse.kernels.planned_copy.checks import check_copy_buffers, check_plan
from specreg_hisparse.kernels.planned_copy.torch_impl import copy_rows_torch, planned_rows
from specreg_hisparse.kernels.planned_copy.triton_impl import copy_planned_triton
from specreg_hisparse.kernels.planned_copy.types import PlannedCopy

__all__ = ["copy_cache_planned", "copy_planned_triton", "copy_rows_torch"]


def copy_cache_planned(
    miss_src: torch.Tensor,
    miss_dst: torch.Tensor,
    miss_count: torch.Tensor,
    num_real_reqs: int | torch.Tensor | None,
    host_cache: torch.Tensor,
    device_buffer: torch.Tensor,
    *,
    check_values: bool | None = None,
    backend: str | None = None,
) -> None:
    """Replay a recorded miss plan into another layer's host cache and device buffer.

    For layers sharing the anchor's top-k selection: device rows are layer-independent, so the
    sharing layer then reads ``device_buffer[locs]`` with the anchor's locations. `backend`:
    'auto' | 'torch' | 'triton', or None for ``SPECREG_KERNEL_BACKEND``.
    """
    check_plan(miss_src, miss_dst, miss_count)
    bs = miss_count.shape[0]
    check_copy_buffers(host_cache, device_buffer)
    device = check_same_device(miss_src=miss_src, device_buffer=device_buffer)
    if num_real_reqs is None:
        num_real_reqs = bs
    if isinstance(num_real_reqs, torch.Tensor):
        num_real_t = num_real_reqs.reshape(1).to(torch.int32)
        num_real_int: int | None = None
    else:
        num_real_t = torch.tensor([int(num_real_reqs)], dtype=torch.int32, device=device)
        num_real_int = int(num_real_reqs)
    checking = should_check_values(device, check_values)
    torch_path = select_backend(miss_src, requested=backend) != "triton"
    copy = PlannedCopy(
        miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count, num_real=num_real_t,
        host_cache=host_cache, device_buffer=device_buffer, num_real_int=num_real_int,
    )  # fmt: skip
    if not (checking or torch_path):
        copy_planned_triton(copy)
        return
    real = copy.real_rows()
    if checking:
        check_index_range("miss_count", miss_count[:real], 0, miss_src.shape[1] + 1)
    src, dst = planned_rows(miss_src, miss_dst, miss_count, real)  # from the counts alone
    if checking:
        check_index_range("miss_src", src, 0, host_cache.shape[0])
        check_index_range("miss_dst", dst, 0, device_buffer.shape[0])
    if torch_path:
        copy_rows_torch(src, dst, host_cache, device_buffer)
    else:
        copy_planned_triton(copy)
