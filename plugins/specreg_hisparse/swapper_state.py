"""The state a `HiSparseSwapper` keeps between calls, and what one swap call leaves behind.

`SwapState` holds the policy tensors the swap kernels read and write (hot slots, LRU stamps,
tail, host locations, the device error counter) and the kernels' reused workspaces; `MissPlan`
and `SwapStats` record one call's copies and counters. All are allocated by the swapper on first
use, never when a plan is resolved.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from specreg_hisparse.sizes import HiSparseLayout


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


class SwapState:
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
