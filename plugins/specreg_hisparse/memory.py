"""The buffers a HiSparse layout implies, in bytes, computed from the layout alone."""

from __future__ import annotations

from specreg.memory import Buffer
from specreg_hisparse.layout import HiSparseLayout

_I32, _I64 = 4, 8


def hisparse_buffers(layout: HiSparseLayout) -> list[Buffer]:
    """Swap state, the device buffer and host cache a server allocates with the swapper's
    helpers, and the largest per-call miss plan (every request slot at the maximum steps)."""
    lay = layout
    slots_hot = lay.layers * lay.req_slots * lay.hot_size
    plan_cols = lay.req_slots * lay.plan_capacity()
    return [
        Buffer(name="device_buffer", device_bytes=lay.device_rows * lay.row_bytes,
               per=f"{lay.device_rows} rows x {lay.row_bytes} B"),
        Buffer(name="host_cache", host_bytes=lay.host_rows * lay.row_bytes,
               per=f"{lay.host_rows} rows x {lay.row_bytes} B"),
        Buffer(name="slot_rows", device_bytes=lay.req_slots * lay.buffer_size * _I32),
        Buffer(name="slot_tokens+slot_stamp", device_bytes=slots_hot * (_I32 + _I64)),
        Buffer(name="host_cache_locs", device_bytes=lay.req_slots * lay.max_seq_len * _I64),
        Buffer(name="tail_tokens+clock",
               device_bytes=lay.req_slots * (lay.page_size * _I32 + lay.layers * _I64)),
        Buffer(name="miss_plan", device_bytes=plan_cols * (_I64 + _I32),
               per=f"per call at batch {lay.req_slots}"),
    ]
