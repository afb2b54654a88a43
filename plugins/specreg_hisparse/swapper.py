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

The swapper validates each call (`specreg_hisparse.swapper_checks`) and keeps the policy state
(`specreg_hisparse.swapper_state`); the work is the kernel families'
(`specreg_hisparse.kernels.swap`, `specreg_hisparse.kernels.planned_copy`), run on the backend
fixed when the swapper is built (``SPECREG_KERNEL_BACKEND`` at resolve time).
"""

from __future__ import annotations

import torch

from specreg.backend import requested_backend
from specreg.contract.memory import Buffer
from specreg.errors import CacheMissError, problem
from specreg.kernels.checks import (
    check_index_range,
    check_same_device,
    check_shape,
    should_check_values,
)
from specreg_hisparse import swapper_checks as checks
from specreg_hisparse.kernels.swap import swap as run_swap
from specreg_hisparse.kernels.swap.types import PADDED_LOCATION, SwapCall
from specreg_hisparse.sizes import HiSparseLayout, hisparse_buffers
from specreg_hisparse.swapper_state import MissPlan, SwapState, SwapStats

__all__ = ["PADDED_ROW_LOCATION", "HiSparseSwapper", "MissPlan", "SwapState", "SwapStats"]

PADDED_ROW_LOCATION = PADDED_LOCATION  # what CUDA-graph padding rows get (a valid row)


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
            checks.check_host_cache_locs(layout, self.device, host_cache_locs)
        self._host_cache_locs = host_cache_locs
        self.backend = requested_backend()  # fixed while the plan is resolved
        self._state: SwapState | None = None  # allocated on first use, never at resolve time
        self.last_plan: MissPlan | None = None
        self.last_stats: SwapStats | None = None
        self.totals = torch.zeros(3, dtype=torch.int64, device=self.device)  # hits, misses, bytes

    @property
    def state(self) -> SwapState:
        """The swap state tensors, allocated on first use (see `memory()` for their size)."""
        if self._state is None:
            with torch.inference_mode(False):  # first use may be inside a loop's inference mode
                self._state = SwapState(self.layout, self.device, self._host_cache_locs)
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
        row_elems = checks.row_elems(self.layout, "new_host_cache", row_elems, dtype)
        pin = self.device.type == "cuda" if pin is None else pin
        return torch.zeros(
            (self.layout.host_rows, row_elems), dtype=dtype, device="cpu", pin_memory=pin
        )

    def new_device_buffer(
        self, row_elems: int | None = None, dtype: torch.dtype = torch.uint8
    ) -> torch.Tensor:
        """A zeroed device buffer ``[device_rows, row_elems]`` on the swapper's device.

        `row_elems` defaults to the layout's row_bytes in elements of `dtype`."""
        row_elems = checks.row_elems(self.layout, "new_device_buffer", row_elems, dtype)
        return torch.zeros((self.layout.device_rows, row_elems), dtype=dtype, device=self.device)

    def default_host_rows(
        self, req_pool_indices: torch.Tensor, positions: torch.Tensor
    ) -> torch.Tensor:
        """The host row a toy loop can use for each (slot, position): slot * max_seq_len + pos."""
        return req_pool_indices.long() * self.layout.max_seq_len + positions.long()

    # -------------------------------------------------------------------------- serving loop
    def reset_request(self, slot: int) -> None:
        """Prepare request slot `slot` for a new request: empty buffer, tail and host locations."""
        checks.check_slot(self.layout, slot)
        st = self.state
        st.slot_tokens[:, slot] = -1
        st.slot_stamp[:, slot] = -1
        st.clock[:, slot] = 0
        st.tail_tokens[slot] = -1
        st.host_cache_locs[slot] = -1

    def assign_tail(self, req_pool_indices: torch.Tensor, positions: torch.Tensor) -> torch.Tensor:
        """Place new tokens in their tail slots (``position % page_size``); return their device
        rows (int64, shape of `positions`). Any stale hot copy of those positions is dropped."""
        req, pos = checks.tail_args(self.layout, self.device, req_pool_indices, positions)
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
        req, pos = checks.tail_args(self.layout, self.device, req_pool_indices, positions)
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
        req, pos = checks.tail_args(self.layout, self.device, req_pool_indices, positions)
        checks.check_buffers(self.layout, host_cache, device_buffer)
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
        tokens = checks.swap_tokens(lay, top_k_tokens)
        bs, steps, top_k = tokens.shape
        checks.check_call_args(req_pool_indices, seq_lens, bs, steps)
        device = check_same_device(
            top_k_tokens=tokens, req_pool_indices=req_pool_indices, seq_lens=seq_lens,
            device_buffer=device_buffer,
        )  # fmt: skip
        if device != self.device:
            check_same_device(state=self.state.clock, top_k_tokens=tokens)
        checks.check_layer(lay, layer)
        checks.check_buffers(lay, host_cache, device_buffer)
        num_real_t, num_real_int = checks.num_real(num_real_reqs, bs, device)
        plan = checks.plan_buffers(
            record_plan, miss_src, miss_dst, miss_count, bs, steps * top_k, self.device
        )
        tokens = tokens.contiguous()
        seq2 = seq_lens.reshape(bs, steps).contiguous()
        req = req_pool_indices.contiguous()
        if should_check_values(device, check_values):
            real = num_real_int if num_real_int is not None else int(num_real_t.item())
            checks.check_values(lay, tokens, req, seq2, real)
        out = checks.out_buffer(out, top_k_tokens, tokens, device)
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
