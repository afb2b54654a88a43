"""The Triton implementation of the HiSparse swap decision: one program per request row.

Same decisions as `reference.py` (and `torch_impl.py`): `tl.sort` of packed ``(token << 20 |
slot)`` keys plus a binary search for hits, a sort and prefix sum for the distinct misses, a
sort of ``(stamp, slot)`` keys for the victims, and the commit in place. No host sync: a miss
with no host copy is counted in the state's `error_count` instead of raised.
"""

from __future__ import annotations

from specreg.kernels.triton_shim import tl, triton
from specreg_hisparse.kernels.swap.types import BIG_KEY, SwapCall

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


def _log2(value: int) -> int:
    return max(0, (value - 1).bit_length())


def swap_triton(call: SwapCall) -> None:
    """The Triton path of `swap_torch` (same decisions, no host sync); a miss with no host copy
    gets location -1, is not planned, and is counted in ``state.error_count`` (SR409 later)."""
    tokens, state, layout, miss_src = call.tokens, call.state, call.layout, call.miss_src
    bs, steps, top_k = tokens.shape
    if bs == 0:
        return
    n = steps * top_k
    block_n = triton.next_power_of_2(max(n, 2))
    block_h = triton.next_power_of_2(max(layout.hot_size, 2))
    ws = state.workspace(bs, block_n, block_h, tokens.device)
    _swap_plan_commit_kernel[(bs,)](
        tokens, call.req, call.seq_lens, call.num_real,
        state.slot_tokens, state.slot_stamp, state.clock, state.tail_tokens, state.slot_rows,
        state.host_cache_locs,
        call.out, miss_src, call.miss_dst, call.miss_count, miss_src.stride(0), call.hits,
        state.error_count,
        ws["keys"], ws["hit"], ws["sorted"], ws["uniq"], ws["dst"], ws["final"], ws["tok"],
        call.layer, layout.req_slots, layout.max_seq_len,
        S=steps, K=top_k, HOT=layout.hot_size, PAGE=layout.page_size, BUF=layout.buffer_size,
        BLOCK_N=block_n, BLOCK_H=block_h, LOG_N=_log2(block_n), LOG_H=_log2(block_h),
        BIG=BIG_KEY,
        num_warps=min(32, max(4, max(block_n, block_h) // 256)),  # ~8 elements per thread
    )  # fmt: skip
