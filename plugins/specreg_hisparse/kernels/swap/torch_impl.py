"""The torch implementation of the HiSparse swap decision (the CPU path), CPU-tuned branches included.

One call resolves every step of one verify for one anchor layer, plans its misses and commits
the policy state; the rule is `reference.py`'s (the plain per-request LRU rule). This version
works on two dense maps over (batch row, token) instead of per-request loops, and on CPU takes
numpy for the miss scan, the victim partition and the stamp commit when numpy is installed
(~3x faster); without numpy (or off CPU) the torch-only branches make the same decisions.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from specreg.errors import CacheMissError, problem
from specreg_hisparse.kernels.swap.types import (
    BIG_KEY,
    PADDED_LOCATION,
    SLOT_BITS,
    SLOT_MASK,
    SwapCall,
)

try:  # optional: the CPU miss scan and victim selection run ~3x faster through numpy
    import numpy
except ImportError:  # pragma: no cover - torch runs without numpy
    numpy = None

if TYPE_CHECKING:
    from specreg_hisparse.sizes import HiSparseLayout

ABSENT_ROW = -2  # the location map's value for a token in neither the hot buffer nor the tail


def _torch_maps(
    state: Any, bs: int, layout: HiSparseLayout, device: torch.device
) -> tuple[torch.Tensor, torch.Tensor]:
    """The two dense maps of one call over (batch row, 1 + token), freshly initialised.

    Column 0 is INVALID (what invalid occurrences and empty slots read: location -1, never
    selected); column ``1 + t`` is token ``t``; the last column (token `max_seq_len`) is junk.
    `loc` starts as `ABSENT_ROW`, `selected` as False. The storage is kept on the swapper state
    and grown to the largest batch seen: refilling it costs less than allocating (page faults).
    """
    cache = state.__dict__.setdefault("_torch_maps", {})
    key = str(device)
    if key not in cache or cache[key][0].shape[0] < bs:
        width = layout.max_seq_len + 2
        cache[key] = (
            torch.empty((bs, width), dtype=torch.int32, device=device),
            torch.empty((bs, width), dtype=torch.bool, device=device),
        )
    loc, selected = cache[key][0][:bs], cache[key][1][:bs]
    loc.fill_(ABSENT_ROW)
    loc[:, 0] = -1
    selected.zero_()
    return loc, selected


def _missing_keys(selected: torch.Tensor, loc_map: torch.Tensor) -> torch.Tensor:
    """int64 flat indices, ascending, of the map entries selected but absent (the misses)."""
    if numpy is not None and selected.device.type == "cpu":  # mask and scan ~4x faster here
        missing = selected.numpy() & (loc_map.numpy() == ABSENT_ROW)
        return torch.from_numpy(numpy.flatnonzero(missing))
    return (selected & (loc_map == ABSENT_ROW)).view(-1).nonzero().squeeze(1)


def _write_rows(target: torch.Tensor, rows: torch.Tensor, values: torch.Tensor) -> None:
    """``target[rows] = values`` for distinct `rows` of a 2-D tensor (numpy copies whole rows
    on CPU, ~5x faster than the element-wise `index_copy_`)."""
    if numpy is not None and target.device.type == "cpu":
        target.numpy()[rows.numpy()] = values.numpy()
    else:
        target.index_copy_(0, rows, values)


def _smallest_sorted(keys: torch.Tensor, k: int) -> torch.Tensor:
    """The `k` smallest keys of each row, ascending (= topk(k, largest=False, sorted=True)
    values; on CPU numpy's introselect + a sort of the k beats torch's topk ~3x)."""
    if numpy is not None and keys.device.type == "cpu":
        part = numpy.partition(keys.numpy(), k - 1, axis=1)[:, :k]
        part.sort(axis=1)
        return torch.from_numpy(numpy.ascontiguousarray(part))
    return keys.topk(k, dim=1, largest=False, sorted=True).values


def swap_torch(call: SwapCall) -> tuple[torch.Tensor, torch.Tensor]:
    """Resolve, plan and commit one call (see the module docstring); IO is a separate copy.

    Writes `call.out`, the plan and `call.hits` in place and returns the plan's (host rows,
    device rows) pairs flattened, for `copy_rows_torch`. Raises SR409 before changing anything
    when a miss has no host copy.

    Works on two dense maps over (batch row, token) (see `_torch_maps`): `loc`, the device
    row of every hot and tail token (the tail written last, so it wins: rule 2), and `selected`,
    the tokens some valid occurrence reads. The misses are the selected tokens `loc` lacks, in
    (row, token) order straight off the map; the output is one gather of `loc` once the
    misses' rows are in it. CPU note: masks are applied with arithmetic (clamp, multiply-add),
    which runs several times faster than `where`/`masked_fill` on this path.
    """
    tokens, req, seq_lens, layer, state, layout = (
        call.tokens, call.req, call.seq_lens, call.layer, call.state, call.layout
    )
    out, miss_src, miss_dst, miss_count, hits = (
        call.out, call.miss_src, call.miss_dst, call.miss_count, call.hits
    )
    num_real = call.real_rows()
    bs, steps, top_k = tokens.shape
    n = steps * top_k
    hot, page, buf = layout.hot_size, layout.page_size, layout.buffer_size
    seq_cap = layout.max_seq_len
    width = seq_cap + 2
    dev = tokens.device
    loc_map, selected = _torch_maps(state, bs, layout, dev)
    r = req.long()
    # 1. the column each occurrence reads: 1 + token, or 0 (INVALID) for -1 / >= seq_len
    col = tokens.view(bs, steps, top_k).to(torch.long, copy=True)  # never the caller's tensor
    seq3 = seq_lens.view(bs, steps, 1)
    if bs and not bool((col.amax(2, keepdim=True) < seq3).all()):  # tokens past seq_len: rare
        col.masked_fill_(col >= seq3, -1)
    col = col.clamp_(min=-1).add_(1).view(bs, n)
    col[num_real:] = 0
    selected.scatter_(1, col, torch.ones((1, 1), dtype=torch.bool, device=dev).expand(bs, n))
    # 2. the map: hot tokens (empty slots write column 0), then tail tokens over them (position
    #    p sits in tail slot p % page); a hot slot holding a tail token is never hit (rule 2)
    hot_cols = state.slot_tokens[layer].index_select(0, r).long().clamp_(min=-1).add_(1)
    loc_map.scatter_(1, hot_cols, state.slot_rows[:, :hot].index_select(0, r))
    tail = state.tail_tokens.index_select(0, r).long()
    tail_ok = (tail >= 0) & (tail < seq_cap) & (tail % page == torch.arange(page, device=dev))
    tail_cols = (tail + 1).mul_(tail_ok)
    loc_map.scatter_(1, tail_cols, state.slot_rows[:, hot : hot + page].index_select(0, r))
    loc_map[:, 0] = -1
    selected[:, 0] = False
    selected.scatter_(1, tail_cols, torch.zeros_like(tail_cols, dtype=torch.bool))
    # 3. hits: hot slots whose token is selected
    hitmask = selected.gather(1, hot_cols)
    hit_long = hitmask.long()
    n_hits = hit_long.sum(1)
    # 4. misses: selected tokens in neither, ascending per row
    keys = _missing_keys(selected, loc_map)
    urow = torch.div(keys, width, rounding_mode="floor")
    utok = keys - urow * width - 1
    m = torch.bincount(urow, minlength=bs)
    rank = torch.arange(keys.numel(), device=dev) - (m.cumsum(0) - m).index_select(0, urow)
    ureq = r.index_select(0, urow)
    src_rows = state.host_cache_locs.view(-1).index_select(0, ureq * seq_cap + utok)
    bad = (src_rows < 0).nonzero()
    if bad.numel():
        first = int(bad[0, 0])
        row, token = int(urow[first]), int(utok[first])
        raise CacheMissError(
            problem(
                "SR409",
                f"token {token} of batch row {row} (request slot {int(r[row])}) is in neither "
                "the tail, the hot buffer nor the host cache (host_cache_locs < 0)",
                accepted="tokens written with write_tail(...) or registered with set_host_locs(...)",
                fix="back up every token to the host before it leaves the tail",
                field="top_k_tokens",
            )
        )
    # 5. victims: unhit hot slots by (stamp, slot); only the first max(misses) are ever used
    stamp = state.slot_stamp[layer].index_select(0, r)
    ekey = torch.add(torch.arange(1 << SLOT_BITS, (1 << SLOT_BITS) + hot, device=dev), stamp,
                     alpha=1 << SLOT_BITS).add_(hit_long, alpha=BIG_KEY)  # fmt: skip
    k_victims = max(1, min(hot, int(m.max()) if bs else 1))
    evict_slots = _smallest_sorted(ekey, k_victims)
    n_evict = (hot - n_hits).index_select(0, urow)
    in_hot = rank < n_evict
    evicted = evict_slots.view(-1).index_select(0, urow * k_victims + rank.clamp(max=k_victims - 1))
    victim = torch.where(in_hot, evicted & SLOT_MASK, layout.scratch_start + rank - n_evict)
    # 6. outputs and plan
    dst_rows = state.slot_rows.view(-1).index_select(0, ureq * buf + victim)
    loc_map.view(-1).index_copy_(0, keys, dst_rows)
    torch.gather(loc_map, 1, col, out=out.view(bs, n))
    out[num_real:] = PADDED_LOCATION
    plan_at = urow * miss_src.stride(0) + rank
    miss_src[:, :n] = -1
    miss_dst[:, :n] = -1
    span = ((bs - 1) * miss_src.stride(0) + miss_src.shape[1],)  # rows may be padded apart
    miss_src.as_strided(span, (1,)).index_copy_(0, plan_at, src_rows)
    miss_dst.as_strided(span, (1,)).index_copy_(0, plan_at, dst_rows)
    miss_count.copy_(m)
    hits.copy_(n_hits)
    # 7. commit (real rows only: padded rows select nothing, so they hit and miss nothing)
    t = state.clock[layer].index_select(0, r) + 1
    admit = in_hot.nonzero().squeeze(1)
    admit_slot = victim.index_select(0, admit)
    admit_row = urow.index_select(0, admit)
    hit_long.view(-1).index_fill_(0, admit_row * hot + admit_slot, 1)
    new_stamp = stamp.addcmul_(hit_long, t[:, None] - stamp)  # t where hit or admitted
    real_rows = r[:num_real]
    _write_rows(state.slot_stamp[layer], real_rows, new_stamp[:num_real])
    state.slot_tokens[layer].view(-1).index_copy_(
        0, r.index_select(0, admit_row) * hot + admit_slot, utok.index_select(0, admit).int()
    )
    state.clock[layer].index_copy_(0, real_rows, t[:num_real])
    return src_rows, dst_rows
