"""The checks of a `HiSparseSwapper` call's arguments: coded errors before any kernel runs.

Shapes, dtypes, devices and row sizes are checked on every call; checks that read tensor values
(slot and position ranges, repeated slots) run where they do not sync a device
(`specreg.kernels.checks.should_check_values`). Each function names the argument it refuses.
"""

from __future__ import annotations

import torch

from specreg.errors import KernelInputError, problem
from specreg.integers import is_int
from specreg.kernels.checks import (
    INDEX_DTYPES,
    check_dtype,
    check_index_range,
    check_same_device,
    check_shape,
    check_tensor,
    should_check_values,
)
from specreg_hisparse.kernels.planned_copy.checks import check_plan
from specreg_hisparse.sizes import HiSparseLayout, steps_problem
from specreg_hisparse.swapper_state import MissPlan


def check_host_cache_locs(
    layout: HiSparseLayout, device: torch.device, host_cache_locs: torch.Tensor
) -> None:
    """A server's own host-location map: int64 ``[req_slots, max_seq_len]``, contiguous, on the
    swapper's device (the swapper writes it in place)."""
    check_tensor("host_cache_locs", host_cache_locs)
    check_dtype("host_cache_locs", host_cache_locs, [torch.int64])
    check_shape("host_cache_locs", host_cache_locs, [layout.req_slots, layout.max_seq_len])
    if not host_cache_locs.is_contiguous() or host_cache_locs.device != device:
        check_same_device(host_cache_locs=host_cache_locs, swapper=torch.empty(0, device=device))
        raise KernelInputError(
            problem(
                "SR904",
                "host_cache_locs must be contiguous",
                accepted="a contiguous int64 [req_slots, max_seq_len] tensor",
                fix="pass host_cache_locs.contiguous() (the swapper writes it in place)",
                field="host_cache_locs",
            )
        )


def check_slot(layout: HiSparseLayout, slot: int) -> None:
    """SR903 unless `slot` is a request slot of the layout."""
    if not 0 <= int(slot) < layout.req_slots:
        raise KernelInputError(
            problem(
                "SR903",
                f"request slot {slot} is outside [0, {layout.req_slots})",
                accepted=f"slots in [0, {layout.req_slots})",
                fix="raise --kv-cache-option req_slots or check the slot allocator",
                field="slot",
            )
        )


def swap_tokens(layout: HiSparseLayout, top_k_tokens: torch.Tensor) -> torch.Tensor:
    """`top_k_tokens` as ``[bs, steps, top_k]`` (a 2-D one-step call gains its step axis), with
    steps and top_k within the layout (SR408-style step problem, SR412)."""
    tokens = check_tensor("top_k_tokens", top_k_tokens)
    check_dtype("top_k_tokens", tokens, INDEX_DTYPES)
    if tokens.dim() == 2:
        tokens = tokens.unsqueeze(1)
    if tokens.dim() != 3:
        check_shape("top_k_tokens", tokens, [None, None, None])
    _, steps, top_k = tokens.shape
    if steps < 1 or steps > layout.max_steps:
        raise KernelInputError(steps_problem(steps, layout.max_steps))
    if top_k > layout.top_k:
        raise KernelInputError(
            problem(
                "SR412",
                f"top_k_tokens selects {top_k} tokens per step, the layout holds {layout.top_k}",
                accepted=f"top_k <= {layout.top_k}",
                fix=f"set --kv-cache-option top_k={top_k}",
                field="top_k_tokens",
            )
        )
    return tokens


def check_call_args(
    req_pool_indices: torch.Tensor, seq_lens: torch.Tensor, bs: int, steps: int
) -> None:
    """`req_pool_indices` ``[bs]`` and `seq_lens` ``[bs]`` (one step), ``[bs, steps]`` or
    ``[bs * steps]``, of index dtypes."""
    check_shape("req_pool_indices", req_pool_indices, [bs])
    check_dtype("req_pool_indices", req_pool_indices, INDEX_DTYPES)
    check_dtype("seq_lens", seq_lens, INDEX_DTYPES)
    if tuple(seq_lens.shape) not in ((bs, steps), (bs * steps,)) + (
        ((bs,),) if steps == 1 else ()
    ):
        check_shape("seq_lens", seq_lens, [bs, steps])


def check_layer(layout: HiSparseLayout, layer: int) -> None:
    """SR903 unless `layer` is one of the layout's anchor layers."""
    if not 0 <= layer < layout.layers:
        raise KernelInputError(
            problem(
                "SR903",
                f"layer {layer} is outside [0, {layout.layers})",
                accepted=f"anchor layers 0..{layout.layers - 1}",
                fix="set --kv-cache-option layers=N to the number of anchor layers",
                field="layer",
            )
        )


def out_buffer(
    out: torch.Tensor | None, top_k_tokens: torch.Tensor, tokens: torch.Tensor,
    device: torch.device,
) -> torch.Tensor:
    """Where a swap writes its rows: `out` (a contiguous int32 tensor of `top_k_tokens`' shape,
    viewed as ``[bs, steps, top_k]``), or a new tensor."""
    if out is None:
        return torch.empty(tokens.shape, dtype=torch.int32, device=device)
    check_tensor("out", out)
    check_dtype("out", out, [torch.int32])
    check_shape("out", out, list(top_k_tokens.shape))
    check_same_device(out=out, top_k_tokens=tokens)
    if not out.is_contiguous():
        raise KernelInputError(
            problem(
                "SR904",
                "out must be contiguous (the swap writes it as [bs, steps, top_k] rows)",
                accepted="a contiguous int32 tensor of top_k_tokens' shape",
                fix="pass a contiguous buffer, or none (the swapper allocates one)",
                field="out",
            )
        )
    return out.view(tokens.shape)


def row_elems(
    layout: HiSparseLayout, helper: str, row_elems: int | None, dtype: torch.dtype
) -> int:
    """The row length in `dtype` elements that makes rows of the layout's row_bytes."""
    size = dtype.itemsize
    want = layout.row_bytes
    if row_elems is None and want % size == 0:
        return want // size
    if row_elems is not None and row_elems * size == want:
        return row_elems
    got = f"row_elems={row_elems} x {size} bytes = {row_elems * size}" if row_elems else (
        f"{want} bytes do not divide into {dtype} elements of {size} bytes"
    )
    hint = f"call {helper}(dtype={dtype}) without row_elems" if want % size == 0 else (
        f"pass a dtype whose size divides {want}, e.g. torch.uint8"
    )
    raise KernelInputError(
        problem(
            "SR411",
            f"{helper}: {got}, but the layout's row_bytes is {want}",
            accepted=f"rows of {want} bytes (row_elems x the dtype's size)",
            fix=f"{hint} (it derives the row length from row_bytes), or set "
            f"--kv-cache-option row_bytes=N to your model's real KV row size",
            field="row_elems",
        )
    )


def check_row_size(layout: HiSparseLayout, name: str, row_bytes: int) -> None:
    if row_bytes != layout.row_bytes:
        raise KernelInputError(
            problem(
                "SR411",
                f"{name} rows are {row_bytes} bytes, the layout's row_bytes is "
                f"{layout.row_bytes}",
                accepted=f"rows of {layout.row_bytes} bytes",
                fix=f"set --kv-cache-option row_bytes={row_bytes} or allocate {name} with "
                "the swapper's helpers",
                field=name,
            )
        )


def check_buffers(
    layout: HiSparseLayout, host_cache: torch.Tensor, device_buffer: torch.Tensor
) -> None:
    for name, buf, rows in (
        ("host_cache", host_cache, layout.host_rows),
        ("device_buffer", device_buffer, layout.device_rows),
    ):
        check_tensor(name, buf)
        if buf.dim() < 2 or not buf.is_contiguous():
            raise KernelInputError(
                problem(
                    "SR411",
                    f"{name} must be a contiguous [rows, ...] tensor, got shape "
                    f"{list(buf.shape)} (contiguous={buf.is_contiguous()})",
                    accepted="a contiguous tensor of at least 2 dimensions",
                    fix=f"allocate {name} with the swapper's helpers",
                    field=name,
                )
            )
        check_row_size(layout, name, buf.stride(0) * buf.element_size())
        if buf.shape[0] < rows:
            check_shape(name, buf, [rows, *buf.shape[1:]])
    if host_cache.dtype != device_buffer.dtype:
        check_dtype("device_buffer", device_buffer, [host_cache.dtype])
    if host_cache.device != device_buffer.device and not (
        host_cache.device.type == "cpu" and host_cache.is_pinned()
    ):
        check_same_device(device_buffer=device_buffer, host_cache=host_cache)


def num_real(
    value: int | torch.Tensor | None, bs: int, device: torch.device
) -> tuple[torch.Tensor, int | None]:
    """`num_real_reqs` as an int32 ``[1]`` device tensor, and as an int when it was one."""
    if value is None:
        value = bs
    if isinstance(value, torch.Tensor):
        check_dtype("num_real_reqs", value, INDEX_DTYPES)
        if value.numel() != 1:
            check_shape("num_real_reqs", value, [1])
        check_same_device(num_real_reqs=value, top_k_tokens=torch.empty(0, device=device))
        return value.reshape(1).to(torch.int32), None
    if not is_int(value) or not 0 <= value <= bs:
        raise KernelInputError(
            problem(
                "SR904",
                f"num_real_reqs={value!r} is not an int in [0, {bs}]",
                accepted=f"an int in [0, {bs}] or an int32 [1] device tensor",
                fix="pass the number of real (unpadded) batch rows",
                field="num_real_reqs",
            )
        )
    return torch.tensor([value], dtype=torch.int32, device=device), value


def plan_buffers(
    record_plan: bool,
    miss_src: torch.Tensor | None,
    miss_dst: torch.Tensor | None,
    miss_count: torch.Tensor | None,
    bs: int,
    cap: int,
    device: torch.device,
) -> MissPlan:
    """The miss plan a call writes: the caller's three buffers (with `record_plan`), or new ones."""
    given = [t is not None for t in (miss_src, miss_dst, miss_count)]
    if any(given) and not record_plan:
        raise KernelInputError(
            problem(
                "SR407",
                "miss-plan buffers require record_plan=True",
                accepted="record_plan=True with all three buffers, or no buffers",
                fix="pass record_plan=True, or drop miss_src/miss_dst/miss_count",
                field="record_plan",
            )
        )
    if not any(given):
        return MissPlan(
            miss_src=torch.empty((bs, cap), dtype=torch.int64, device=device),
            miss_dst=torch.empty((bs, cap), dtype=torch.int32, device=device),
            miss_count=torch.empty(bs, dtype=torch.int32, device=device),
        )
    check_plan(miss_src, miss_dst, miss_count, bs=bs, cap=cap)  # SR407 unless all three
    return MissPlan(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count)  # type: ignore[arg-type]


def check_values(
    layout: HiSparseLayout, tokens: torch.Tensor, req: torch.Tensor, seq_lens: torch.Tensor,
    num_real: int,
) -> None:
    """The value checks of a swap call (they sync): slots and lengths in range, no slot twice
    among the real rows."""
    real_req = req[:num_real]
    if real_req.numel() and not _within(real_req, 0, layout.req_slots):
        check_index_range("req_pool_indices", real_req, 0, layout.req_slots)
    real_seq = seq_lens[:num_real]
    if real_seq.numel() and not _within(real_seq, 0, layout.max_seq_len + 1):
        check_index_range("seq_lens", real_seq, 0, layout.max_seq_len + 1)
    if real_req.numel() and int(torch.bincount(real_req.reshape(-1)).max()) > 1:
        raise KernelInputError(
            problem(
                "SR410",
                f"req_pool_indices repeats a request slot among the {num_real} real rows: "
                f"{real_req.tolist()}",
                accepted="distinct slots for real rows",
                fix="give every running request its own slot",
                field="req_pool_indices",
            )
        )
    if not 0 <= int(num_real) <= tokens.shape[0]:
        raise KernelInputError(
            problem(
                "SR904",
                f"num_real_reqs={num_real} is outside [0, {tokens.shape[0]}]",
                accepted=f"[0, {tokens.shape[0]}]",
                fix="pass the number of real batch rows",
                field="num_real_reqs",
            )
        )


def tail_args(
    layout: HiSparseLayout, device: torch.device, req_pool_indices: torch.Tensor,
    positions: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(slot, position) pairs of a tail write as flat int64 tensors on `device`; each pair once."""
    check_dtype("req_pool_indices", req_pool_indices, INDEX_DTYPES)
    check_dtype("positions", positions, INDEX_DTYPES)
    req = req_pool_indices.reshape(-1).to(device, torch.int64)
    pos = positions.reshape(-1).to(device, torch.int64)
    check_shape("positions", pos, [req.numel()])
    if should_check_values(device, None):  # data checks sync: CPU only
        check_index_range("req_pool_indices", req, 0, layout.req_slots)
        check_index_range("positions", pos, 0, layout.max_seq_len)
        pairs = req * layout.max_seq_len + pos
        if pairs.unique().numel() != pairs.numel():
            raise KernelInputError(
                problem(
                    "SR904",
                    "a (request slot, position) pair is written twice in one call",
                    accepted="distinct positions per request slot",
                    fix="write each new token once per call",
                    field="positions",
                )
            )
    return req, pos


def _within(values: torch.Tensor, low: int, high: int) -> bool:
    """Whether every value lies in [low, high): one reduction, for the common passing case
    (`check_index_range` then builds the error)."""
    lowest, highest = torch.aminmax(values)
    return low <= int(lowest) and int(highest) < high
