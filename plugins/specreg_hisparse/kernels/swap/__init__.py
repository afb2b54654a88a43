"""The HiSparse swap: resolve, plan and commit one call of one anchor layer, then copy its misses.

`swap` is the public wrapper: it picks the backend (`specreg.backend.select_backend`, `backend=`
as requested) and dispatches to `torch_impl` (then the torch row copy) or `triton_impl` (then the
Triton planned copy). The call's inputs come validated by `HiSparseSwapper.swap`, which builds
the `SwapCall`; the rule both implementations follow is `reference.py`'s.
"""

from __future__ import annotations

import torch

from specreg.backend import select_backend
from specreg_hisparse.kernels.planned_copy import copy_planned_triton, copy_rows_torch
from specreg_hisparse.kernels.planned_copy.types import PlannedCopy
from specreg_hisparse.kernels.swap.torch_impl import swap_torch
from specreg_hisparse.kernels.swap.triton_impl import swap_triton
from specreg_hisparse.kernels.swap.types import SwapCall


def swap(
    call: SwapCall,
    *,
    host_cache: torch.Tensor,
    device_buffer: torch.Tensor,
    backend: str | None = None,
) -> None:
    """Run `call` (outputs and state written in place) and copy its misses' rows from
    `host_cache` to `device_buffer`. `backend`: 'auto' | 'torch' | 'triton', or None for
    ``SPECREG_KERNEL_BACKEND``. The torch path raises SR409 for a miss with no host copy; the
    Triton path counts it in ``call.state.error_count``."""
    if select_backend(call.tokens, requested=backend) == "triton":
        swap_triton(call)
        copy_planned_triton(
            PlannedCopy(
                miss_src=call.miss_src, miss_dst=call.miss_dst, miss_count=call.miss_count,
                num_real=call.num_real, host_cache=host_cache, device_buffer=device_buffer,
            )  # fmt: skip
        )
    else:
        src_rows, dst_rows = swap_torch(call)
        copy_rows_torch(src_rows, dst_rows, host_cache, device_buffer)
