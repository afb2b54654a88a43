"""Tree sampling in Triton: one program per request walks its tree, the vocabulary streamed in
BLOCK_V tiles, no host synchronisation.

A residual mass is summed only where a next sibling will test it, a node's masses only where
the walk goes on below it, and the final token is drawn in two levels
(`specreg_eagle.kernels.residual_draw`) from one read of its row plus one block.
"""

from __future__ import annotations

import torch

from specreg.kernels.triton_shim import tl, triton
from specreg_eagle.kernels.residual_draw import DRAW_BLOCK
from specreg_eagle.kernels.verify_greedy.checks import verify_tile
from specreg_eagle.kernels.verify_greedy.triton_impl import triton_outputs, triton_result
from specreg_eagle.kernels.verify_greedy.types import TreeVerifyResult
from specreg_eagle.kernels.verify_sampling.types import TreeSamplingInputs

if triton is not None:
    from specreg_eagle.kernels.verify_greedy.triton_impl import walk_step, write_bonus

    @triton.jit
    def _row_sums(p_ptr, q_ptr, row, vocab, HAS_Q: tl.constexpr, BLOCK_V: tl.constexpr):
        offs = tl.arange(0, BLOCK_V)
        p_sum = tl.zeros([BLOCK_V], tl.float32)
        q_sum = tl.zeros([BLOCK_V], tl.float32)
        for v0 in range(0, vocab, BLOCK_V):
            v = v0 + offs
            p_sum += tl.load(p_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
            if HAS_Q:
                q_sum += tl.load(q_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
        return tl.sum(p_sum, axis=0), tl.sum(q_sum, axis=0)

    @triton.jit
    def _final_tile(p_ptr, q_ptr, row, v, vocab, coef, rrs, tried_tok, live, delta,
                    HAS_Q: tl.constexpr):
        """One tile of the final draw's row: p, and the weights the draw uses (the residual
        max(p - coef q, 0) where it has mass, less the tried siblings' share)."""
        pv = tl.load(p_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
        w = pv
        if HAS_Q:
            qv = tl.load(q_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
            w = tl.where(rrs, tl.maximum(pv - coef * qv, 0.0), pv)
        hit = (v[:, None] == tried_tok[None, :]) & live[None, :]
        w = tl.maximum(w + tl.sum(tl.where(hit, delta[None, :], 0.0), axis=1), 0.0)
        return pv, w

    @triton.jit
    def _two_level_draw(p_ptr, q_ptr, row, vocab, coef, rrs, tried_tok, live, delta, sums,
                        coin, HAS_Q: tl.constexpr, DRAW_BLOCK: tl.constexpr,
                        DRAW_TILE: tl.constexpr):
        """The inverse-CDF draw of `specreg_eagle.kernels.residual_draw` from one streamed read
        of the row: the block sums of the weights (and of p, the fallback) go to `sums`
        ([2, blocks] float32), then the first block whose float64 running sum passes the
        target, then the running sum inside that block alone."""
        blocks = tl.cdiv(vocab, DRAW_BLOCK)
        per_tile: tl.constexpr = DRAW_TILE // DRAW_BLOCK
        offs = tl.arange(0, DRAW_TILE)
        ids = tl.arange(0, per_tile)
        total_w = tl.full([], 0.0, tl.float64)
        total_p = tl.full([], 0.0, tl.float64)
        for v0 in range(0, vocab, DRAW_TILE):
            v = v0 + offs
            pv, w = _final_tile(p_ptr, q_ptr, row, v, vocab, coef, rrs, tried_tok, live, delta,
                                HAS_Q)
            w_sums = tl.sum(tl.reshape(w, [per_tile, DRAW_BLOCK]), axis=1)
            p_sums = tl.sum(tl.reshape(pv, [per_tile, DRAW_BLOCK]), axis=1)
            at = v0 // DRAW_BLOCK + ids
            tl.store(sums + at, w_sums, mask=at < blocks)
            tl.store(sums + blocks + at, p_sums, mask=at < blocks)
            total_w += tl.sum(w_sums.to(tl.float64), axis=0)
            total_p += tl.sum(p_sums.to(tl.float64), axis=0)
        # Other threads of this program read the block sums back: order the stores first.
        tl.debug_barrier()
        use_p = total_w <= 0
        sums += tl.where(use_p, blocks, 0)
        target = coin * tl.where(use_p, total_p, total_w)
        running = tl.full([], 0.0, tl.float64)
        found = tl.full([], -1, tl.int64)
        before = tl.full([], 0.0, tl.float64)
        last_pos = tl.full([], -1, tl.int64)
        last_before = tl.full([], 0.0, tl.float64)
        for b0 in range(0, blocks, DRAW_TILE):
            at = b0 + offs
            s = tl.load(sums + at, mask=at < blocks, other=0.0)
            cum = tl.cumsum(s.to(tl.float64), axis=0) + running
            ok = (cum > target) & (s > 0)
            first = tl.min(tl.where(ok, at, blocks), axis=0).to(tl.int64)
            first_before = tl.sum(tl.where(at < first, s.to(tl.float64), 0.0), axis=0) + running
            take = (found < 0) & (first < blocks)
            before = tl.where(take, first_before, before)
            found = tl.where(take, first, found)
            tile_last = tl.max(tl.where(s > 0, at, -1), axis=0).to(tl.int64)
            tile_before = tl.sum(tl.where(at < tile_last, s.to(tl.float64), 0.0), axis=0) + running
            last_before = tl.where(tile_last >= 0, tile_before, last_before)
            last_pos = tl.maximum(last_pos, tile_last)
            running += tl.sum(s.to(tl.float64), axis=0)
        before = tl.where(found >= 0, before, last_before)
        block = tl.where(found >= 0, found, tl.maximum(last_pos, 0))
        slots = tl.arange(0, DRAW_BLOCK)
        v = block * DRAW_BLOCK + slots
        pv, w = _final_tile(p_ptr, q_ptr, row, v, vocab, coef, rrs, tried_tok, live, delta, HAS_Q)
        w = tl.where(use_p, pv, w)
        cum = tl.cumsum(w.to(tl.float64), axis=0) + before
        ok = (cum > target) & (w > 0)
        first = tl.min(tl.where(ok, slots, DRAW_BLOCK), axis=0).to(tl.int64)
        last_in = tl.maximum(tl.max(tl.where(w > 0, slots, -1), axis=0).to(tl.int64), 0)
        return block * DRAW_BLOCK + tl.where(first < DRAW_BLOCK, first, last_in)

    @triton.jit
    def _tree_sampling_kernel(
        cand_ptr, ridx_ptr, nt_ptr, ns_ptr, p_ptr, q_ptr, coins_ptr, final_ptr,
        predicts_ptr, acc_ptr, num_ptr, bonus_ptr, out_ptr, sums_ptr,
        vocab, depth, thr_single, thr_acc,
        N: tl.constexpr, HAS_Q: tl.constexpr, CAP: tl.constexpr, BLOCK_V: tl.constexpr,
        DRAW_BLOCK: tl.constexpr, DRAW_TILE: tl.constexpr,
    ):
        r = tl.program_id(0).to(tl.int64)
        base = r * N
        slots = depth + 1
        idx = tl.arange(0, CAP)
        offs = tl.arange(0, BLOCK_V)
        tried_tok = tl.full([CAP], -1, tl.int64)
        tried_val = tl.zeros([CAP], tl.float32)
        tried_p = tl.zeros([CAP], tl.float32)
        tried_q = tl.zeros([CAP], tl.float32)
        cnt = tl.full([], 0, tl.int64)
        tl.store(acc_ptr + r * slots, tl.load(ridx_ptr + base).to(tl.int64))
        last = tl.full([], 0, tl.int64)
        cur = tl.load(nt_ptr + base).to(tl.int64)
        count = tl.full([], 0, tl.int64)
        prob_acc = tl.full([], 0.0, tl.float32)
        coef = tl.full([], 0.0, tl.float32)
        norm = tl.full([], 0.0, tl.float32)
        q_left = tl.full([], 0.0, tl.float32)
        if HAS_Q:  # the target-only rule needs no masses
            norm, q_left = _row_sums(p_ptr, q_ptr, base * vocab, vocab, HAS_Q, BLOCK_V)
        rrs = q_left > 0
        for _ in range(N - 1):
            active = (cur >= 0) & (count < depth)
            safe = tl.maximum(cur, 0)
            x = tl.load(cand_ptr + base + safe).to(tl.int64)
            x_ok = (x >= 0) & (x < vocab)
            xs = tl.minimum(tl.maximum(x, 0), vocab - 1)
            row = (base + last) * vocab
            p_x = tl.load(p_ptr + row + xs).to(tl.float32)
            live = idx < cnt
            dup_hits = live & (tried_tok == xs)
            dup = tl.max(dup_hits.to(tl.int32), axis=0) > 0
            dup_val = tl.sum(tl.where(dup_hits, tried_val, 0.0), axis=0)
            eff = tl.where(dup, 0.0, p_x)
            acc_new = prob_acc + eff
            u_parent = tl.load(coins_ptr + base + last).to(tl.float32)
            accept = (u_parent < acc_new / thr_acc) | (eff >= thr_single)
            q_x = tl.full([], 0.0, tl.float32)
            new_coef = coef
            if HAS_Q:
                q_x = tl.load(q_ptr + row + xs).to(tl.float32)
                a_x = tl.where(dup, dup_val, coef)
                r_x = tl.maximum(p_x - a_x * q_x, 0.0)
                q_eff = tl.where(dup | (q_left <= 0), 0.0, q_x)
                u_child = tl.load(coins_ptr + base + tl.maximum(safe - 1, 0)).to(tl.float32)
                accept_rrs = u_child * q_eff * norm < r_x * q_left
                accept = tl.where(rrs, accept_rrs, accept)
                new_coef = tl.where(q_left > 0, coef + norm / tl.maximum(q_left, 1e-30), coef)
            accept = active & x_ok & accept
            reject = active & (~accept)
            append = reject & (~dup) & x_ok
            store_val = tl.where(rrs, new_coef, eff)
            put = append & (idx == cnt)
            tried_tok = tl.where(put, xs, tried_tok)
            tried_val = tl.where(put, store_val, tried_val)
            tried_p = tl.where(put, p_x, tried_p)
            tried_q = tl.where(put, q_x, tried_q)
            cnt += append.to(tl.int64)
            prob_acc = tl.where(reject, acc_new, prob_acc)
            if HAS_Q:
                q_left = tl.where(append & rrs, q_left - q_x, q_left)
                coef = tl.where(reject & rrs, new_coef, coef)
                sibling = tl.load(ns_ptr + base + safe).to(tl.int64)
                if reject & rrs & (sibling >= 0):
                    dense = tl.zeros([BLOCK_V], tl.float32)
                    for v0 in range(0, vocab, BLOCK_V):
                        v = v0 + offs
                        pv = tl.load(p_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
                        qv = tl.load(q_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
                        dense += tl.maximum(pv - coef * qv, 0.0)
                    live2 = idx < cnt
                    frozen = tl.maximum(tried_p - tried_val * tried_q, 0.0)
                    moving = tl.maximum(tried_p - coef * tried_q, 0.0)
                    norm = tl.sum(dense, axis=0) + tl.sum(tl.where(live2, frozen - moving, 0.0), axis=0)
            # Move down on acceptance, right on rejection.
            last, cur, count = walk_step(
                ridx_ptr, nt_ptr, ns_ptr, predicts_ptr, acc_ptr, out_ptr,
                base, r * slots, last, safe, cur, count, xs, accept, active,
            )
            prob_acc = tl.where(accept, 0.0, prob_acc)
            cnt = tl.where(accept, 0, cnt)
            coef = tl.where(accept, 0.0, coef)
            if HAS_Q:
                # Masses only below a node the walk goes on from (not a leaf, not at the depth).
                grows = accept & (count < depth) & (tl.load(nt_ptr + base + last) >= 0)
                if grows:
                    norm, q_left = _row_sums(p_ptr, q_ptr, (base + last) * vocab, vocab, HAS_Q, BLOCK_V)
                rrs = tl.where(accept, grows & (q_left > 0), rrs)

        # Final draw from the residual at `last` by inverse CDF.
        row = (base + last) * vocab
        live = idx < cnt
        if HAS_Q:
            frozen = tl.maximum(tried_p - tried_val * tried_q, 0.0)
            moving = tl.maximum(tried_p - coef * tried_q, 0.0)
            delta = tl.where(rrs, frozen - moving, -tried_p)
        else:
            delta = -tried_p
        delta = tl.where(live, delta, 0.0)
        bonus = _two_level_draw(
            p_ptr, q_ptr, row, vocab, coef, rrs, tried_tok, live, delta,
            sums_ptr + r * 2 * tl.cdiv(vocab, DRAW_BLOCK), tl.load(final_ptr + r).to(tl.float64),
            HAS_Q, DRAW_BLOCK, DRAW_TILE,
        )
        write_bonus(
            ridx_ptr, predicts_ptr, out_ptr, num_ptr, bonus_ptr, base, r, r * slots, last, count,
            bonus,
        )


def verify_tree_sampling_triton(
    inputs: TreeSamplingInputs, *, block_v: int | None = None
) -> TreeVerifyResult:
    """Tree sampling of `inputs`; `block_v` as `verify_tile` takes it (None: the default)."""
    candidates, depth, draft_probs = inputs.candidates, inputs.depth, inputs.draft_probs
    b, n, vocab = inputs.target_probs.shape
    parts = triton_outputs(b, n, depth, candidates.device)
    # Scratch: the block sums of each request's final draw (weights, then p), [b, 2, blocks].
    sums = torch.empty(b, 2 * -(-vocab // DRAW_BLOCK), dtype=torch.float32,
                       device=candidates.device)
    p = inputs.target_probs.contiguous()
    q = draft_probs.contiguous() if draft_probs is not None else p
    tile = verify_tile(vocab, block_v)
    if b > 0:
        _tree_sampling_kernel[(b,)](
            candidates.contiguous(), inputs.retrieve_index.contiguous(),
            inputs.next_token.contiguous(), inputs.next_sibling.contiguous(), p, q,
            inputs.coins.contiguous(), inputs.final_coins.contiguous(),
            *parts, sums, vocab, depth, float(inputs.threshold_single),
            float(inputs.threshold_acc), N=n, HAS_Q=draft_probs is not None,
            CAP=max(triton.next_power_of_2(max(n - 1, 1)), 2), BLOCK_V=tile,
            DRAW_BLOCK=DRAW_BLOCK, DRAW_TILE=max(tile, DRAW_BLOCK),
        )
    return triton_result(parts)
