"""Input validation of the planned copy: a miss plan's three tensors and the buffers it copies between."""

from __future__ import annotations

import torch

from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import check_dtype, check_same_device, check_shape, check_tensor


def check_plan(
    miss_src: torch.Tensor | None,
    miss_dst: torch.Tensor | None,
    miss_count: torch.Tensor | None,
    *,
    bs: int | None = None,
    cap: int | None = None,
) -> None:
    """Validate a miss plan: all three given (SR407), dtypes (SR901), shapes (SR900), one row
    stride (SR408)."""
    if miss_src is None or miss_dst is None or miss_count is None:
        missing = [
            n for n, t in (("miss_src", miss_src), ("miss_dst", miss_dst), ("miss_count", miss_count))
            if t is None
        ]  # fmt: skip
        raise KernelInputError(
            problem(
                "SR407",
                f"miss_src, miss_dst and miss_count must be provided together; missing "
                f"{', '.join(missing)}",
                accepted="all three plan tensors, or none",
                fix="pass the three tensors of one recorded plan",
                field=missing[0],
            )
        )
    check_dtype("miss_src", miss_src, [torch.int64])
    check_dtype("miss_dst", miss_dst, [torch.int32])
    check_dtype("miss_count", miss_count, [torch.int32])
    rows = miss_count.shape[0] if bs is None and miss_count.dim() == 1 else bs
    check_shape("miss_count", miss_count, [rows])
    width = miss_src.shape[-1] if miss_src.dim() == 2 else 0
    if cap is not None and width < cap:
        raise KernelInputError(
            problem(
                "SR900",
                f"miss_src has shape {list(miss_src.shape)}, expected [{rows}, >= {cap}] "
                "(steps * top_k columns)",
                accepted=f"[{rows}, >= {cap}]",
                fix="allocate the plan with steps * top_k columns",
                field="miss_src",
            )
        )
    check_shape("miss_src", miss_src, [rows, None])
    check_shape("miss_dst", miss_dst, [rows, miss_src.shape[1]])
    if (
        miss_src.stride(0) != miss_dst.stride(0)
        or miss_src.stride(1) != 1
        or miss_dst.stride(1) != 1
    ):
        raise KernelInputError(
            problem(
                "SR408",
                f"miss_src/miss_dst row strides must match with contiguous rows, got strides "
                f"{miss_src.stride()} and {miss_dst.stride()}",
                accepted="equal stride(0), stride(1) == 1",
                fix="allocate both with torch.empty((bs, capacity), ...)",
                field="miss_dst",
            )
        )
    check_same_device(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count)


def check_copy_buffers(host_cache: torch.Tensor, device_buffer: torch.Tensor) -> None:
    """Both buffers contiguous ``[rows, ...]`` tensors (SR411) with rows of one byte size."""
    for name, buf in (("host_cache", host_cache), ("device_buffer", device_buffer)):
        check_tensor(name, buf)
        if buf.dim() < 2 or not buf.is_contiguous():
            check_shape(name, buf.contiguous() if buf.dim() >= 2 else buf, [None, None])
            raise KernelInputError(
                problem(
                    "SR411",
                    f"{name} must have contiguous rows",
                    accepted="a contiguous [rows, ...] tensor",
                    fix=f"pass {name}.contiguous()",
                    field=name,
                )
            )
    if (
        host_cache.stride(0) * host_cache.element_size()
        != device_buffer.stride(0) * device_buffer.element_size()
    ):
        raise KernelInputError(
            problem(
                "SR411",
                f"host_cache rows are {host_cache.stride(0) * host_cache.element_size()} bytes, "
                f"device_buffer rows {device_buffer.stride(0) * device_buffer.element_size()}",
                accepted="equal row sizes",
                fix="pass the host cache and device buffer of the same layer",
                field="device_buffer",
            )
        )
