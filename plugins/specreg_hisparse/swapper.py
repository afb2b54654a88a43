"""`HiSparseSwapper`, the object a HiSparse plan hands out: per-request hot buffers over a host KV cache.

Serving-loop API (all tensors on the swapper's device unless noted):

- ``reset_request(slot)``: a new request takes request slot ``slot`` (clears its buffer,
  tail and host locations).
- ``write_tail(req_pool_indices, positions, kv, host_cache=..., device_buffer=...)``: the KV of
  newly computed tokens: written to their tail rows on device and to the host cache, and their
  host rows registered in ``host_cache_locs``. ``assign_tail`` alone returns the device rows.
- ``swap(top_k_tokens, req_pool_indices, seq_lens, num_real_reqs, layer=..., host_cache=...,
  device_buffer=...)``: device rows for the selected tokens; attention reads
  ``device_buffer[locs]``.
- ``copy_cache_planned(...)`` (`specreg_hisparse.kernels.planned_copy`): replay a recorded
  miss plan into another layer's buffers.

The swapper validates each call and keeps the policy state; the work is the kernel families'
(`specreg_hisparse.kernels.swap`, `specreg_hisparse.kernels.planned_copy`), run on the backend
fixed when the swapper is built (``SPECREG_KERNEL_BACKEND`` at resolve time).
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from specreg.backend import requested_backend
from specreg.errors import CacheMissError, KernelInputError, problem
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
from specreg.contract.memory import Buffer
from specreg_hisparse.kernels.planned_copy.checks import check_plan
from specreg_hisparse.kernels.swap import swap as run_swap
from specreg_hisparse.kernels.swap.types import PADDED_LOCATION, SwapCall
from specreg_hisparse.sizes import HiSparseLayout, hisparse_buffers, steps_problem

PADDED_ROW_LOCATION = PADDED_LOCATION  # what CUDA-graph padding rows get (a valid row)


@attrs.define
class MissPlan:
    """The copies one call made: ``miss_src[b, :miss_count[b]]`` host rows went to
    ``miss_dst[b, :miss_count[b]]`` device rows (-1 beyond the count)."""

    miss_src: torch.Tensor  # int64 [bs, >= steps * top_k]
    miss_dst: torch.Tensor  # int32, same shape and row stride
    miss_count: torch.Tensor  # int32 [bs]


@attrs.define
class SwapStats:
    """Counters of one call, as device tensors (reading them syncs; producing them does not)."""

    hits: torch.Tensor  # int32 [bs]: distinct tokens served from the hot buffer
    misses: torch.Tensor  # int32 [bs]: distinct tokens copied from the host
    bytes_copied: torch.Tensor  # int64 [bs]: misses * row_bytes


class _State:
    """Tensors of the swap state; field names match the kernels' arguments."""

    def __init__(
        self,
        layout: HiSparseLayout,
        device: torch.device,
        host_cache_locs: torch.Tensor | None = None,
    ) -> None:
        lay = layout
        self.slot_tokens = torch.full(
            (lay.layers, lay.req_slots, lay.hot_size), -1, dtype=torch.int32, device=device
        )
        self.slot_stamp = torch.full(
            (lay.layers, lay.req_slots, lay.hot_size), -1, dtype=torch.int64, device=device
        )
        self.clock = torch.zeros((lay.layers, lay.req_slots), dtype=torch.int64, device=device)
        self.tail_tokens = torch.full(
            (lay.req_slots, lay.page_size), -1, dtype=torch.int32, device=device
        )
        self.slot_rows = torch.arange(
            lay.req_slots * lay.buffer_size, dtype=torch.int32, device=device
        ).view(lay.req_slots, lay.buffer_size)
        self.host_cache_locs = (
            host_cache_locs
            if host_cache_locs is not None
            else torch.full((lay.req_slots, lay.max_seq_len), -1, dtype=torch.int64, device=device)
        )
        self.error_count = torch.zeros(1, dtype=torch.int32, device=device)
        self._ws: dict[tuple[Any, ...], dict[str, torch.Tensor]] = {}

    def workspace(
        self, bs: int, block_n: int, block_h: int, device: torch.device
    ) -> dict[str, torch.Tensor]:
        key = (bs, block_n, block_h, str(device))
        if key not in self._ws:
            i64, i32 = torch.int64, torch.int32
            self._ws[key] = {
                "keys": torch.empty((bs, block_h), dtype=i64, device=device),
                "hit": torch.empty((bs, block_h), dtype=i32, device=device),
                "sorted": torch.empty((bs, block_n), dtype=i64, device=device),
                "uniq": torch.empty((bs, block_n), dtype=i64, device=device),
                "dst": torch.empty((bs, block_n), dtype=i64, device=device),
                "final": torch.empty((bs, block_n), dtype=i32, device=device),
                "tok": torch.empty((bs, block_n), dtype=i64, device=device),
            }
        return self._ws[key]


class HiSparseSwapper:
    """Swaps the selected tokens of every step of one verify into device rows (see module doc).

    Policy: LRU over the hot buffer, ties broken by slot index; a call's tokens are never evicted
    by that call, and afterwards they are the most recently used.
    """

    def __init__(
        self,
        layout: HiSparseLayout,
        device: str | torch.device | None = None,
        *,
        host_cache_locs: torch.Tensor | None = None,
    ) -> None:
        """`host_cache_locs`: a server's own int64 ``[req_slots, max_seq_len]`` map of token
        position -> host row (-1: not on host), shared instead of allocated (the swapper reads
        it, `set_host_locs` / `write_tail` / `reset_request` write it)."""
        self.layout = layout
        self.device = torch.device(device if device is not None else layout.device)
        if host_cache_locs is not None:
            check_tensor("host_cache_locs", host_cache_locs)
            check_dtype("host_cache_locs", host_cache_locs, [torch.int64])
            check_shape("host_cache_locs", host_cache_locs, [layout.req_slots, layout.max_seq_len])
            if not host_cache_locs.is_contiguous() or host_cache_locs.device != self.device:
                check_same_device(
                    host_cache_locs=host_cache_locs, swapper=torch.empty(0, device=self.device)
                )
                raise KernelInputError(
                    problem(
                        "SR904",
                        "host_cache_locs must be contiguous",
                        accepted="a contiguous int64 [req_slots, max_seq_len] tensor",
                        fix="pass host_cache_locs.contiguous() (the swapper writes it in place)",
                        field="host_cache_locs",
                    )
                )
        self._host_cache_locs = host_cache_locs
        self.backend = requested_backend()  # fixed while the plan is resolved
        self._state: _State | None = None  # allocated on first use, never at resolve time
        self.last_plan: MissPlan | None = None
        self.last_stats: SwapStats | None = None
        self.totals = torch.zeros(3, dtype=torch.int64, device=self.device)  # hits, misses, bytes

    @property
    def state(self) -> _State:
        """The swap state tensors, allocated on first use (see `memory()` for their size)."""
        if self._state is None:
            with torch.inference_mode(False):  # first use may be inside a loop's inference mode
                self._state = _State(self.layout, self.device, self._host_cache_locs)
        return self._state

    def memory(self) -> list[Buffer]:
        """Every buffer this cache implies, in bytes (the plan's memory contract)."""
        return hisparse_buffers(self.layout)

    def describe(self) -> str:
        lay = self.layout
        return (
            f"HiSparseSwapper(steps 1..{lay.max_steps} per call, top_k={lay.top_k}, "
            f"hot_size={lay.hot_size}, tail={lay.page_size}, scratch={lay.scratch_rows}, "
            f"req_slots={lay.req_slots}, row_bytes={lay.row_bytes}, policy={lay.policy}, "
            f"device={self.device})"
        )

    # ---------------------------------------------------------------------------- state views
    @property
    def host_cache_locs(self) -> torch.Tensor:
        """int64 ``[req_slots, max_seq_len]``: token position -> host row, -1 = not on host."""
        return self.state.host_cache_locs

    @property
    def slot_tokens(self) -> torch.Tensor:
        """int32 ``[layers, req_slots, hot_size]``: token held by each hot slot, -1 = empty."""
        return self.state.slot_tokens

    @property
    def slot_rows(self) -> torch.Tensor:
        """int32 ``[req_slots, buffer_size]``: the physical device row of every buffer slot."""
        return self.state.slot_rows

    @property
    def tail_tokens(self) -> torch.Tensor:
        """int32 ``[req_slots, page_size]``: position held by each tail slot, -1 = empty."""
        return self.state.tail_tokens

    @property
    def error_count(self) -> torch.Tensor:
        """int32 ``[1]`` device counter of unserveable tokens (GPU path; no sync to update)."""
        return self.state.error_count

    def check_errors(self) -> None:
        """Sync and raise SR409 if any earlier call met a token with no host copy."""
        count = int(self.state.error_count.item())
        if count:
            self.state.error_count.zero_()
            raise CacheMissError(
                problem(
                    "SR409",
                    f"{count} selected token(s) had no host copy and were returned as -1",
                    accepted="tokens written with write_tail(...) or set_host_locs(...)",
                    fix="back up every token to the host before it leaves the tail",
                    field="top_k_tokens",
                )
            )

    # ------------------------------------------------------------------------- allocation
    def new_host_cache(
        self,
        row_elems: int | None = None,
        dtype: torch.dtype = torch.uint8,
        *,
        pin: bool | None = None,
    ) -> torch.Tensor:
        """A zeroed host cache ``[host_rows, row_elems]`` (pinned when the swapper is on CUDA).

        `row_elems` defaults to the layout's row_bytes in elements of `dtype`."""
        row_elems = self._row_elems("new_host_cache", row_elems, dtype)
        pin = self.device.type == "cuda" if pin is None else pin
        return torch.zeros(
            (self.layout.host_rows, row_elems), dtype=dtype, device="cpu", pin_memory=pin
        )

    def new_device_buffer(
        self, row_elems: int | None = None, dtype: torch.dtype = torch.uint8
    ) -> torch.Tensor:
        """A zeroed device buffer ``[device_rows, row_elems]`` on the swapper's device.

        `row_elems` defaults to the layout's row_bytes in elements of `dtype`."""
        row_elems = self._row_elems("new_device_buffer", row_elems, dtype)
        return torch.zeros((self.layout.device_rows, row_elems), dtype=dtype, device=self.device)

    def default_host_rows(
        self, req_pool_indices: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """The host row a toy loop can use for each (slot, position): slot * max_seq_len + pos."""
        return req_pool_indices.long() * self.layout.max_seq_len + positions.long()

    # -------------------------------------------------------------------------- serving loop
    def reset_request(self, slot: int) -> None:
        """Prepare request slot `slot` for a new request: empty buffer, tail and host locations."""
        if not 0 <= int(slot) < self.layout.req_slots:
            raise KernelInputError(
                problem(
                    "SR903",
                    f"request slot {slot} is outside [0, {self.layout.req_slots})",
                    accepted=f"slots in [0, {self.layout.req_slots})",
                    fix="raise --kv-cache-option req_slots or check the slot allocator",
                    field="slot",
                )
            )
        st = self.state
        st.slot_tokens[:, slot] = -1
        st.slot_stamp[:, slot] = -1
        st.clock[:, slot] = 0
        st.tail_tokens[slot] = -1
        st.host_cache_locs[slot] = -1

    def assign_tail(self, req_pool_indices: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Place new tokens in their tail slots (``position % page_size``); return their device
        rows (int64, shape of `positions`). Any stale hot copy of those positions is dropped."""
        req, pos = self._tail_args(req_pool_indices, positions)
        lay, st = self.layout, self.state
        tail_slot = pos % lay.page_size
        st.tail_tokens[req, tail_slot] = pos.to(torch.int32)
        # drop stale hot copies of rewritten positions without a host sync: at most one slot
        # per (layer, request) holds a position, so add (-1 - value) there and 0 elsewhere
        held = st.slot_tokens[:, req]  # [L, n, hot]
        stale = held == pos.to(torch.int32)[None, :, None]
        has = stale.any(2)
        slot = stale.int().argmax(2)
        layer_idx = torch.arange(lay.layers, device=self.device)[:, None].expand_as(slot)
        index = (layer_idx, req[None, :].expand_as(slot), slot)
        token_now = held.gather(2, slot[..., None]).squeeze(2)
        stamp_now = st.slot_stamp[index]
        st.slot_tokens.index_put_(index, torch.where(has, -1 - token_now, 0), accumulate=True)
        st.slot_stamp.index_put_(index, torch.where(has, -1 - stamp_now, 0), accumulate=True)
        return st.slot_rows[req, lay.hot_size + tail_slot].long().view(positions.shape)

    def set_host_locs(
        self, req_pool_indices: torch.Tensor, positions: torch.Tensor, host_rows: torch.Tensor
    ) -> None:
        """Record that the KV of (slot, position) lives in host row `host_rows` (-1: nowhere)."""
        req, pos = self._tail_args(req_pool_indices, positions)
        rows = host_rows.reshape(-1).to(self.device, torch.int64)
        if should_check_values(self.device, None):
            check_index_range("host_rows", rows, 0, self.layout.host_rows, allow=(-1,))
        self.state.host_cache_locs[req, pos] = rows

    def write_tail(
        self,
        req_pool_indices: torch.Tensor,
        positions: torch.Tensor,
        kv: torch.Tensor,
        *,
        host_cache: torch.Tensor,
        device_buffer: torch.Tensor,
        host_rows: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Write one layer's KV rows ``kv [n, row_elems]`` of new tokens to their tail rows and to
        the host cache (rows `host_rows`, default `default_host_rows`). Call once per layer with
        the same positions; returns the device rows."""
        req, pos = self._tail_args(req_pool_indices, positions)
        self._check_buffers(host_cache, device_buffer)
        check_shape(
            "kv", kv, [req.numel(), device_buffer.reshape(device_buffer.shape[0], -1).shape[1]]
        )
        rows = self.assign_tail(req, pos)
        if host_rows is None:
            host_rows = self.default_host_rows(req, pos)
        self.set_host_locs(req, pos, host_rows)
        dev = device_buffer.reshape(device_buffer.shape[0], -1)
        host = host_cache.reshape(host_cache.shape[0], -1)
        flat_kv = kv.reshape(kv.shape[0], -1).to(dev.dtype)
        dev.index_copy_(0, rows.to(dev.device), flat_kv.to(dev.device))
        host.index_copy_(0, host_rows.reshape(-1).long().to(host.device), flat_kv.to(host.device))
        return rows

    # --------------------------------------------------------------------------------- swap
    def swap(
        self,
        top_k_tokens: torch.Tensor,
        req_pool_indices: torch.Tensor,
        seq_lens: torch.Tensor,
        num_real_reqs: int | torch.Tensor | None = None,
        *,
        layer: int = 0,
        host_cache: torch.Tensor,
        device_buffer: torch.Tensor,
        record_plan: bool = False,
        miss_src: torch.Tensor | None = None,
        miss_dst: torch.Tensor | None = None,
        miss_count: torch.Tensor | None = None,
        check_values: bool | None = None,
        out: torch.Tensor | None = None,
    ) -> torch.Tensor:
        """Device rows (int32, shape of `top_k_tokens`) holding the selected tokens' KV.

        - `top_k_tokens`: int32/int64 ``[bs, top_k]`` (one step) or ``[bs, steps, top_k]``.
        - `seq_lens`: the sequence length each step attends to: ``[bs]`` (one step), or
          ``[bs, steps]`` / ``[bs * steps]`` (row-major: request, then step).
        - `num_real_reqs`: rows ``>= num_real_reqs`` are CUDA-graph padding: they get
          `PADDED_ROW_LOCATION`, a miss count of 0, and change no state. int or int32 ``[1]``.
        - Entries that are -1 or ``>= seq_len`` of their step give -1.
        - `record_plan`: expose the miss plan in `miss_src`/`miss_dst`/`miss_count` (all three,
          or none to get swapper-owned buffers); it is always available as `last_plan`.
        - `out`: a contiguous int32 tensor of `top_k_tokens`' shape to write the rows into (a
          server's graph-stable buffer); returned.
        """
        lay = self.layout
        tokens = check_tensor("top_k_tokens", top_k_tokens)
        check_dtype("top_k_tokens", tokens, INDEX_DTYPES)
        if tokens.dim() == 2:
            tokens = tokens.unsqueeze(1)
        if tokens.dim() != 3:
            check_shape("top_k_tokens", tokens, [None, None, None])
        bs, steps, top_k = tokens.shape
        if steps < 1 or steps > lay.max_steps:
            raise KernelInputError(steps_problem(steps, lay.max_steps))
        if top_k > lay.top_k:
            raise KernelInputError(
                problem(
                    "SR412",
                    f"top_k_tokens selects {top_k} tokens per step, the layout holds {lay.top_k}",
                    accepted=f"top_k <= {lay.top_k}",
                    fix=f"set --kv-cache-option top_k={top_k}",
                    field="top_k_tokens",
                )
            )
        check_shape("req_pool_indices", req_pool_indices, [bs])
        check_dtype("req_pool_indices", req_pool_indices, INDEX_DTYPES)
        check_dtype("seq_lens", seq_lens, INDEX_DTYPES)
        if tuple(seq_lens.shape) not in ((bs, steps), (bs * steps,)) + (
            ((bs,),) if steps == 1 else ()
        ):
            check_shape("seq_lens", seq_lens, [bs, steps])
        device = check_same_device(
            top_k_tokens=tokens, req_pool_indices=req_pool_indices, seq_lens=seq_lens,
            device_buffer=device_buffer,
        )  # fmt: skip
        if device != self.device:
            check_same_device(state=self.state.clock, top_k_tokens=tokens)
        if not 0 <= layer < lay.layers:
            raise KernelInputError(
                problem(
                    "SR903",
                    f"layer {layer} is outside [0, {lay.layers})",
                    accepted=f"anchor layers 0..{lay.layers - 1}",
                    fix="set --kv-cache-option layers=N to the number of anchor layers",
                    field="layer",
                )
            )
        self._check_buffers(host_cache, device_buffer)
        num_real_t, num_real_int = self._num_real(num_real_reqs, bs, device)
        plan = self._plan_buffers(record_plan, miss_src, miss_dst, miss_count, bs, steps * top_k)
        tokens = tokens.contiguous()
        seq2 = seq_lens.reshape(bs, steps).contiguous()
        req = req_pool_indices.contiguous()
        if should_check_values(device, check_values):
            self._check_values(
                tokens,
                req,
                seq2,
                num_real_int if num_real_int is not None else int(num_real_t.item()),
            )
        if out is None:
            out = torch.empty(tokens.shape, dtype=torch.int32, device=device)
        else:
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
            out = out.view(tokens.shape)
        hits = torch.empty(bs, dtype=torch.int32, device=device)
        call = SwapCall(
            tokens=tokens, req=req, seq_lens=seq2, num_real=num_real_t, layer=layer,
            state=self.state, layout=lay, out=out, miss_src=plan.miss_src,
            miss_dst=plan.miss_dst, miss_count=plan.miss_count, hits=hits,
            num_real_int=num_real_int,
        )  # fmt: skip
        run_swap(call, host_cache=host_cache, device_buffer=device_buffer, backend=self.backend)
        misses = plan.miss_count
        stats = SwapStats(hits=hits, misses=misses, bytes_copied=misses.long() * lay.row_bytes)
        self.totals += torch.stack(
            [hits.long().sum(), misses.long().sum(), stats.bytes_copied.sum()]
        )
        self.last_plan, self.last_stats = plan, stats
        return out.view(top_k_tokens.shape)

    # ------------------------------------------------------------------------------- checks
    def _row_elems(self, helper: str, row_elems: int | None, dtype: torch.dtype) -> int:
        """The row length in `dtype` elements that makes rows of the layout's row_bytes."""
        size = dtype.itemsize
        want = self.layout.row_bytes
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

    def _check_row_size(self, name: str, row_bytes: int) -> None:
        if row_bytes != self.layout.row_bytes:
            raise KernelInputError(
                problem(
                    "SR411",
                    f"{name} rows are {row_bytes} bytes, the layout's row_bytes is "
                    f"{self.layout.row_bytes}",
                    accepted=f"rows of {self.layout.row_bytes} bytes",
                    fix=f"set --kv-cache-option row_bytes={row_bytes} or allocate {name} with "
                    "the swapper's helpers",
                    field=name,
                )
            )

    def _check_buffers(self, host_cache: torch.Tensor, device_buffer: torch.Tensor) -> None:
        lay = self.layout
        for name, buf, rows in (
            ("host_cache", host_cache, lay.host_rows),
            ("device_buffer", device_buffer, lay.device_rows),
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
            self._check_row_size(name, buf.stride(0) * buf.element_size())
            if buf.shape[0] < rows:
                check_shape(name, buf, [rows, *buf.shape[1:]])
        if host_cache.dtype != device_buffer.dtype:
            check_dtype("device_buffer", device_buffer, [host_cache.dtype])
        if host_cache.device != device_buffer.device and not (
            host_cache.device.type == "cpu" and host_cache.is_pinned()
        ):
            check_same_device(device_buffer=device_buffer, host_cache=host_cache)

    def _num_real(
        self, value: int | torch.Tensor | None, bs: int, device: torch.device
    ) -> tuple[torch.Tensor, int | None]:
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

    def _plan_buffers(
        self,
        record_plan: bool,
        miss_src: torch.Tensor | None,
        miss_dst: torch.Tensor | None,
        miss_count: torch.Tensor | None,
        bs: int,
        cap: int,
    ) -> MissPlan:
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
                miss_src=torch.empty((bs, cap), dtype=torch.int64, device=self.device),
                miss_dst=torch.empty((bs, cap), dtype=torch.int32, device=self.device),
                miss_count=torch.empty(bs, dtype=torch.int32, device=self.device),
            )
        check_plan(miss_src, miss_dst, miss_count, bs=bs, cap=cap)  # SR407 unless all three
        return MissPlan(miss_src=miss_src, miss_dst=miss_dst, miss_count=miss_count)  # type: ignore[arg-type]

    def _check_values(
        self, tokens: torch.Tensor, req: torch.Tensor, seq_lens: torch.Tensor, num_real: int
    ) -> None:
        lay = self.layout
        real_req = req[:num_real]
        if real_req.numel() and not _within(real_req, 0, lay.req_slots):
            check_index_range("req_pool_indices", real_req, 0, lay.req_slots)
        real_seq = seq_lens[:num_real]
        if real_seq.numel() and not _within(real_seq, 0, lay.max_seq_len + 1):
            check_index_range("seq_lens", real_seq, 0, lay.max_seq_len + 1)
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

    def _tail_args(
        self, req_pool_indices: torch.Tensor, positions: torch.Tensor
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_dtype("req_pool_indices", req_pool_indices, INDEX_DTYPES)
        check_dtype("positions", positions, INDEX_DTYPES)
        req = req_pool_indices.reshape(-1).to(self.device, torch.int64)
        pos = positions.reshape(-1).to(self.device, torch.int64)
        check_shape("positions", pos, [req.numel()])
        if should_check_values(self.device, None):  # data checks sync: CPU only
            check_index_range("req_pool_indices", req, 0, self.layout.req_slots)
            check_index_range("positions", pos, 0, self.layout.max_seq_len)
            pairs = req * self.layout.max_seq_len + pos
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
