"""HiSparse swap kernels: the torch implementation (CPU path and oracle) beside the Triton one.

Family: resolve + plan + commit (one call per layer), and the planned copy (the swap's own IO,
and the replay of a recorded plan into another layer's buffers).

Both backends make the same decisions, deterministically, for one request row:

1. valid occurrence: ``0 <= token < seq_len[step]`` on a real row (``row < num_real_reqs``);
2. tail: ``tail_tokens[slot, token % page] == token`` -> tail row, no IO;
3. hit: the hot slot holding the token (found by binary search in the sorted
   ``(token << 20 | slot)`` keys of the hot buffer);
4. misses: the distinct missing tokens, in ascending token order (index ``i``), minus those with
   no host copy (those get -1: the torch wrapper raises SR409 first, Triton counts them);
5. victims: hot slots not hit by this call, ordered by ``(stamp, slot)`` ascending (empty slots
   have stamp -1 and go first); miss ``i < #victims`` takes victim ``i`` and is admitted to the
   hot buffer; the rest use scratch slots ``hot + page + (i - #victims)`` for this call only;
6. commit: admitted and hit slots get the request's new clock value as their stamp.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import torch

from specreg.errors import CacheMissError, problem

try:  # optional: the CPU miss scan and victim selection run ~3x faster through numpy
    import numpy
except ImportError:  # pragma: no cover - torch runs without numpy
    numpy = None

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - exercised only without triton
    triton = None

if TYPE_CHECKING:
    from specreg_hisparse.layout import HiSparseLayout

SLOT_BITS = 20
SLOT_MASK = (1 << SLOT_BITS) - 1
BIG_KEY = 1 << 62  # sorts after every packed key
PADDED_LOCATION = 0  # what CUDA-graph padding rows get: a valid row, so reads stay in bounds


def as_words(buffer: torch.Tensor) -> torch.Tensor:
    """A 2-D KV buffer as `[rows, words]` of int32 (or uint8 when rows are not 4-byte multiples)."""
    raw = buffer.reshape(buffer.shape[0], -1).view(torch.uint8)
    return raw.view(torch.int32) if raw.shape[1] % 4 == 0 else raw


# ------------------------------------------------------------------------------------ torch
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


def swap_torch(
    tokens: torch.Tensor,
    req: torch.Tensor,
    seq_lens: torch.Tensor,
    num_real: int,
    layer: int,
    state: Any,
    layout: HiSparseLayout,
    out: torch.Tensor,
    miss_src: torch.Tensor,
    miss_dst: torch.Tensor,
    miss_count: torch.Tensor,
    hits: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Resolve, plan and commit one call (see the module docstring); IO is a separate copy.

    `tokens` [bs, S, K], `seq_lens` [bs, S]; writes `out`, the plan and `hits` in place and
    returns the plan's (host rows, device rows) pairs flattened, for `copy_rows_torch`.

    Works on two dense maps over (batch row, token) (see `_torch_maps`): `loc`, the device
    row of every hot and tail token (the tail written last, so it wins: rule 2), and `selected`,
    the tokens some valid occurrence reads. The misses are the selected tokens `loc` lacks, in
    (row, token) order straight off the map; the output is one gather of `loc` once the
    misses' rows are in it. CPU note: masks are applied with arithmetic (clamp, multiply-add),
    which runs several times faster than `where`/`masked_fill` on this path.
    """
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


def row_words(buffer: torch.Tensor) -> torch.Tensor:
    """A 2-D KV buffer as `[rows, words]` of the widest word that divides its rows: the torch
    copies move whole words (index_copy_ on CPU goes element by element, so 16-byte words
    copy ~4x faster than int32). Bit-exact: the words are only loaded and stored."""
    raw = buffer.reshape(buffer.shape[0], -1).view(torch.uint8)
    for dtype in (torch.complex128, torch.int64, torch.int32):
        size = dtype.itemsize
        if raw.shape[1] % size == 0 and raw.data_ptr() % size == 0:
            return raw.view(dtype)
    return raw


def copy_rows_torch(
    src_rows: torch.Tensor,
    dst_rows: torch.Tensor,
    host_cache: torch.Tensor,
    device_buffer: torch.Tensor,
) -> None:
    """Copy host rows `src_rows` to device rows `dst_rows` (as the widest words that fit)."""
    if src_rows.numel() == 0:
        return
    host, dev = row_words(host_cache), row_words(device_buffer)
    if host.dtype != dev.dtype:  # aligned differently: the narrower words fit both
        narrow = min(host.dtype, dev.dtype, key=lambda d: d.itemsize)
        host = host.view(torch.uint8).view(narrow)
        dev = dev.view(torch.uint8).view(narrow)
    rows = host.index_select(0, src_rows.to(host.device)).to(dev.device, non_blocking=True)
    dev.index_copy_(0, dst_rows.long().to(dev.device), rows)


def planned_rows(
    miss_src: torch.Tensor, miss_dst: torch.Tensor, miss_count: torch.Tensor, num_real: int
) -> tuple[torch.Tensor, torch.Tensor]:
    """The (host rows, device rows) a plan copies, flattened row by row: entries
    ``[b, :miss_count[b]]`` of the real rows, found from the counts alone (no pass over the
    plan's full width)."""
    num_real = max(0, min(num_real, miss_count.shape[0]))
    counts = miss_count[:num_real].long().clamp(0, miss_src.shape[1])
    total = int(counts.sum()) if num_real else 0
    device = miss_src.device
    if total == 0:
        empty = torch.empty(0, dtype=torch.long, device=device)
        return empty, empty
    # entry j of row b sits at b * stride + j: a global arange plus a per-row offset
    offset = torch.arange(num_real, device=device) * miss_src.stride(0) - (counts.cumsum(0) - counts)
    picked = torch.arange(total, device=device) + offset.repeat_interleave(counts, output_size=total)
    span = ((miss_src.shape[0] - 1) * miss_src.stride(0) + miss_src.shape[1],)
    src = miss_src.as_strided(span, (1,)).index_select(0, picked)
    dst = miss_dst.as_strided(span, (1,)).index_select(0, picked)
    return src, dst


def copy_planned_torch(
    miss_src: torch.Tensor,
    miss_dst: torch.Tensor,
    miss_count: torch.Tensor,
    num_real: int,
    host_cache: torch.Tensor,
    device_buffer: torch.Tensor,
) -> None:
    """Copy host rows `miss_src[b, :miss_count[b]]` to device rows `miss_dst[b, ...]`."""
    if miss_count.shape[0] == 0:
        return
    src, dst = planned_rows(miss_src, miss_dst, miss_count, num_real)
    copy_rows_torch(src, dst, host_cache, device_buffer)


# ----------------------------------------------------------------------------------- triton
if triton is not None:

    @triton.jit
    def _lower_bound(base, target, SIZE: tl.constexpr, LOG: tl.constexpr):
        """First index in the sorted array at `base[0:SIZE]` whose value is >= target."""
        lo = tl.zeros_like(target)
        hi = lo + SIZE
        for _ in tl.static_range(LOG + 1):
            active = lo < hi
            mid = (lo + hi) // 2
            value = tl.load(base + tl.minimum(mid, SIZE - 1), mask=active, other=0)
            right = active & (value < target)
            lo = tl.where(right, mid + 1, lo)
            hi = tl.where(active & ~right, mid, hi)
        return lo

    @triton.jit
    def _swap_plan_commit_kernel(
        tok_ptr, req_ptr, seqlen_ptr, num_real_ptr,
        slot_tokens_ptr, slot_stamp_ptr, clock_ptr, tail_tokens_ptr, slot_rows_ptr, host_locs_ptr,
        out_ptr, miss_src_ptr, miss_dst_ptr, miss_count_ptr, plan_stride, hits_ptr, error_ptr,
        ws_keys_ptr, ws_hit_ptr, ws_sorted_ptr, ws_uniq_ptr, ws_dst_ptr, ws_final_ptr, ws_tok_ptr,
        layer, req_slots, max_seq_len,
        S: tl.constexpr, K: tl.constexpr, HOT: tl.constexpr, PAGE: tl.constexpr,
        BUF: tl.constexpr, BLOCK_N: tl.constexpr, BLOCK_H: tl.constexpr,
        LOG_N: tl.constexpr, LOG_H: tl.constexpr, BIG: tl.constexpr,
    ):  # fmt: skip
        """One program per batch row: resolve, plan and commit (see the module docstring)."""
        b = tl.program_id(0).to(tl.int64)
        N: tl.constexpr = S * K
        MASK: tl.constexpr = (1 << 20) - 1
        real = b < tl.load(num_real_ptr).to(tl.int64)
        r = tl.load(req_ptr + b).to(tl.int64)
        offs = tl.arange(0, BLOCK_N).to(tl.int64)
        nmask = offs < N
        tok = tl.load(tok_ptr + b * N + offs, mask=nmask, other=-1).to(tl.int64)
        sl = tl.load(seqlen_ptr + b * S + offs // K, mask=nmask, other=0).to(tl.int64)
        valid = nmask & (tok >= 0) & (tok < sl) & real
        safe = tl.where(valid, tok, 0)
        row_base = slot_rows_ptr + r * BUF
        # tail
        tail_slot = safe % PAGE
        tail_tok = tl.load(tail_tokens_ptr + r * PAGE + tail_slot, mask=valid, other=-1)
        in_tail = valid & (tail_tok.to(tl.int64) == tok)
        tail_loc = tl.load(row_base + HOT + tail_slot, mask=in_tail, other=-1).to(tl.int64)
        # hot hits
        offs_h = tl.arange(0, BLOCK_H).to(tl.int64)
        hmask = offs_h < HOT
        sbase = (layer * req_slots + r) * HOT
        st = tl.load(slot_tokens_ptr + sbase + offs_h, mask=hmask, other=-1).to(tl.int64)
        hkey = tl.sort(tl.where(hmask & (st >= 0), (st << 20) | offs_h, BIG), 0)
        keys = ws_keys_ptr + b * BLOCK_H
        hitf = ws_hit_ptr + b * BLOCK_H
        tl.store(keys + offs_h, hkey)
        tl.store(hitf + offs_h, tl.zeros([BLOCK_H], tl.int32))
        tl.debug_barrier()
        need = valid & ~in_tail
        pos = _lower_bound(keys, safe << 20, BLOCK_H, LOG_H)
        cand = tl.load(keys + tl.minimum(pos, BLOCK_H - 1))
        found = need & (pos < BLOCK_H) & ((cand >> 20) == tok)
        hit_slot = cand & MASK
        tl.store(hitf + hit_slot, tl.full([BLOCK_N], 1, tl.int32), mask=found)
        # distinct misses, ascending
        miss_occ = need & ~found
        msorted = tl.sort(tl.where(miss_occ, tok, BIG), 0)
        sorted_ws = ws_sorted_ptr + b * BLOCK_N
        uniq_ws = ws_uniq_ptr + b * BLOCK_N
        tl.store(sorted_ws + offs, msorted)
        tl.store(uniq_ws + offs, tl.full([BLOCK_N], BIG, tl.int64))
        tl.debug_barrier()
        prev = tl.load(sorted_ws + offs - 1, mask=offs > 0, other=-1)
        first = (msorted != prev) & (msorted != BIG)
        rank = tl.cumsum(first.to(tl.int32), 0) - 1
        m = tl.sum(first.to(tl.int32), 0)
        tl.store(uniq_ws + rank, msorted, mask=first)
        tl.debug_barrier()
        uniq = tl.load(uniq_ws + offs)
        umask = offs < m
        host_row = tl.load(
            host_locs_ptr + r * max_seq_len + tl.where(umask, uniq, 0), mask=umask, other=-1
        ).to(tl.int64)
        serve = umask & (host_row >= 0)
        bad = tl.sum((umask & (host_row < 0)).to(tl.int32), 0)
        fidx = tl.cumsum(serve.to(tl.int32), 0) - 1
        m2 = tl.sum(serve.to(tl.int32), 0)
        tl.store(ws_final_ptr + b * BLOCK_N + offs, tl.where(serve, fidx, -1))
        tl.store(sorted_ws + fidx, host_row, mask=serve)  # compacted host rows
        tl.store(ws_tok_ptr + b * BLOCK_N + fidx, uniq, mask=serve)  # compacted tokens
        # victims: unhit hot slots by (stamp, slot)
        tl.debug_barrier()
        hit = (tl.load(hitf + offs_h) != 0) & hmask
        n_hits = tl.sum(hit.to(tl.int32), 0)
        stamp = tl.load(slot_stamp_ptr + sbase + offs_h, mask=hmask, other=0)
        ekey = tl.sort(tl.where(hit | ~hmask, BIG, ((stamp + 1) << 20) | offs_h), 0)
        tl.store(keys + offs_h, ekey)
        tl.debug_barrier()
        n_evict = HOT - n_hits
        in_hot = offs < n_evict
        planned = offs < m2
        evict = tl.load(keys + tl.minimum(offs, BLOCK_H - 1), mask=planned & in_hot, other=0)
        victim = tl.where(in_hot, evict & MASK, HOT + PAGE + offs - n_evict)
        victim = tl.where(planned, victim, 0)
        src = tl.load(sorted_ws + offs, mask=planned, other=-1)
        dst = tl.load(row_base + victim, mask=planned, other=-1).to(tl.int64)
        tl.store(ws_dst_ptr + b * BLOCK_N + offs, dst)
        plan_ok = planned & real
        tl.store(miss_src_ptr + b * plan_stride + offs, tl.where(plan_ok, src, -1), mask=nmask)
        tl.store(
            miss_dst_ptr + b * plan_stride + offs,
            tl.where(plan_ok, dst, -1).to(tl.int32),
            mask=nmask,
        )
        tl.store(miss_count_ptr + b, tl.where(real, m2, 0))
        tl.store(hits_ptr + b, tl.where(real, n_hits, 0))
        tl.atomic_add(error_ptr, tl.where(real, bad, 0))
        tl.debug_barrier()
        # outputs
        uidx = _lower_bound(uniq_ws, safe, BLOCK_N, LOG_N)
        final = tl.load(
            ws_final_ptr + b * BLOCK_N + tl.minimum(uidx, BLOCK_N - 1), mask=miss_occ, other=-1
        )
        miss_loc = tl.load(
            ws_dst_ptr + b * BLOCK_N + tl.maximum(final, 0), mask=miss_occ & (final >= 0), other=-1
        )
        hit_loc = tl.load(row_base + hit_slot, mask=found, other=-1).to(tl.int64)
        loc = tl.where(miss_occ, miss_loc, -1)
        loc = tl.where(found, hit_loc, loc)
        loc = tl.where(in_tail, tail_loc, loc)
        loc = tl.where(real, loc, 0)
        tl.store(out_ptr + b * N + offs, loc.to(tl.int32), mask=nmask)
        # commit
        clock = clock_ptr + layer * req_slots + r
        t = tl.load(clock) + 1
        admit = planned & in_hot & real
        ctok = tl.load(ws_tok_ptr + b * BLOCK_N + offs, mask=admit, other=-1)
        tl.store(slot_tokens_ptr + sbase + victim, ctok.to(tl.int32), mask=admit)
        tl.store(slot_stamp_ptr + sbase + victim, tl.zeros([BLOCK_N], tl.int64) + t, mask=admit)
        tl.store(
            slot_stamp_ptr + sbase + offs_h, tl.zeros([BLOCK_H], tl.int64) + t, mask=hit & real
        )
        tl.store(clock, t, mask=real)

    @triton.jit
    def _planned_copy_kernel(
        src_ptr, dst_ptr, count_ptr, num_real_ptr, host_ptr, dev_ptr, plan_stride, row_words,
        BLOCK_M: tl.constexpr, BLOCK_E: tl.constexpr, NUM_CHUNKS: tl.constexpr,
    ):  # fmt: skip
        """Grid (bs, NUM_CHUNKS): chunk c copies misses c*BLOCK_M, (c+NUM_CHUNKS)*BLOCK_M, ..."""
        b = tl.program_id(0).to(tl.int64)
        chunk = tl.program_id(1)
        real = b < tl.load(num_real_ptr).to(tl.int64)
        count = tl.where(real, tl.load(count_ptr + b), 0)
        offs_e = tl.arange(0, BLOCK_E).to(tl.int64)
        emask = offs_e < row_words
        for start in range(chunk * BLOCK_M, count, NUM_CHUNKS * BLOCK_M):
            idx = start + tl.arange(0, BLOCK_M)
            mk = idx < count
            src = tl.load(src_ptr + b * plan_stride + idx, mask=mk, other=0).to(tl.int64)
            dst = tl.load(dst_ptr + b * plan_stride + idx, mask=mk, other=0).to(tl.int64)
            both = mk[:, None] & emask[None, :]
            vals = tl.load(host_ptr + src[:, None] * row_words + offs_e[None, :], mask=both)
            tl.store(dev_ptr + dst[:, None] * row_words + offs_e[None, :], vals, mask=both)


def _log2(value: int) -> int:
    return max(0, (value - 1).bit_length())


def swap_triton(
    tokens: torch.Tensor,
    req: torch.Tensor,
    seq_lens: torch.Tensor,
    num_real: torch.Tensor,
    layer: int,
    state: Any,
    layout: HiSparseLayout,
    out: torch.Tensor,
    miss_src: torch.Tensor,
    miss_dst: torch.Tensor,
    miss_count: torch.Tensor,
    hits: torch.Tensor,
) -> None:
    """The Triton path of `swap_torch` (same decisions); counts SR409 tokens in state.error_count."""
    bs, steps, top_k = tokens.shape
    if bs == 0:
        return
    n = steps * top_k
    block_n = triton.next_power_of_2(max(n, 2))
    block_h = triton.next_power_of_2(max(layout.hot_size, 2))
    ws = state.workspace(bs, block_n, block_h, tokens.device)
    _swap_plan_commit_kernel[(bs,)](
        tokens, req, seq_lens, num_real,
        state.slot_tokens, state.slot_stamp, state.clock, state.tail_tokens, state.slot_rows,
        state.host_cache_locs,
        out, miss_src, miss_dst, miss_count, miss_src.stride(0), hits, state.error_count,
        ws["keys"], ws["hit"], ws["sorted"], ws["uniq"], ws["dst"], ws["final"], ws["tok"],
        layer, layout.req_slots, layout.max_seq_len,
        S=steps, K=top_k, HOT=layout.hot_size, PAGE=layout.page_size, BUF=layout.buffer_size,
        BLOCK_N=block_n, BLOCK_H=block_h, LOG_N=_log2(block_n), LOG_H=_log2(block_h),
        BIG=BIG_KEY,
        num_warps=min(32, max(4, max(block_n, block_h) // 256)),  # ~8 elements per thread
    )  # fmt: skip


def copy_planned_triton(
    miss_src: torch.Tensor,
    miss_dst: torch.Tensor,
    miss_count: torch.Tensor,
    num_real: torch.Tensor,
    host_cache: torch.Tensor,
    device_buffer: torch.Tensor,
    *,
    num_chunks: int | None = None,
    block_m: int = 16,
) -> None:
    """The planned copy on Triton. `host_cache` may be pinned host memory (read through UVA).

    Grid `(bs, num_chunks)`; the default spreads a batch over ~256 programs so small batches
    still keep many loads from the host in flight.
    """
    bs = miss_count.shape[0]
    if bs == 0:
        return
    if num_chunks is None:
        num_chunks = max(1, 256 // bs)
    host = as_words(host_cache)
    dev = as_words(device_buffer)
    words = host.shape[1]
    _planned_copy_kernel[(bs, num_chunks)](
        miss_src, miss_dst, miss_count, num_real, host, dev, miss_src.stride(0), words,
        BLOCK_M=block_m, BLOCK_E=triton.next_power_of_2(words), NUM_CHUNKS=num_chunks,
    )  # fmt: skip
