"""Shared builders for the HiSparse tests: a small layout, filled host caches, a reference."""

from __future__ import annotations

import torch
from specreg_hisparse.sizes import HiSparseLayout, compute_layout
from specreg_hisparse.swapper import HiSparseSwapper

ROW_ELEMS = 4  # int32 words per KV row: row_bytes = 16


def small_layout(**overrides) -> HiSparseLayout:
    args = dict(top_k=4, hot_size=8, page_size=None, req_slots=4, max_steps=3)
    args.update({k: overrides.pop(k) for k in list(overrides) if k in args})
    overrides.setdefault("row_bytes", ROW_ELEMS * 4)
    overrides.setdefault("max_seq_len", 64)
    layout, problems = compute_layout(**args, **overrides)
    assert layout is not None, problems
    return layout


def make_cache(layout: HiSparseLayout, *, host_tokens: int | None = None):
    """A swapper whose host cache row of (slot, pos) holds distinct words, registered for
    positions [0, host_tokens) of every slot (default: all)."""
    swapper = HiSparseSwapper(layout)
    host = swapper.new_host_cache(ROW_ELEMS, torch.int32)
    dev = swapper.new_device_buffer(ROW_ELEMS, torch.int32)
    host.copy_(torch.arange(host.numel(), dtype=torch.int32).view(host.shape) + 1)
    count = layout.max_seq_len if host_tokens is None else host_tokens
    for slot in range(layout.req_slots):
        pos = torch.arange(count)
        req = torch.full((count,), slot)
        swapper.set_host_locs(req, pos, swapper.default_host_rows(req, pos))
    return swapper, host, dev


def host_rows_of(swapper, req: torch.Tensor, tokens: torch.Tensor) -> torch.Tensor:
    """host_cache_locs of every entry of tokens [bs, S, K] (clamped to >= 0)."""
    bs = tokens.shape[0]
    slots = req.long().view(bs, *([1] * (tokens.dim() - 1))).expand(tokens.shape)
    return swapper.host_cache_locs[slots, tokens.long().clamp(min=0)]
