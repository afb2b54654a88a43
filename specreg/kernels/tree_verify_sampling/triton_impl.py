"""Tree sampling in Triton: one program per request walks its tree, the vocabulary streamed in
BLOCK_V tiles, no host synchronisation.

A residual mass is summed only where a next sibling will test it, a node's masses only where
the walk goes on below it, and the final token is raced in two levels on the random stream
(`specreg.kernels.tree_residual_draw`; the chain kernels' block sums and race) from one read
of its row plus one block, its key lanes computed in-kernel from (request key, role, absolute
position).
"""

from __future__ import annotations

import torch

from specreg.kernels.random_stream.types import RACE_BLOCK
from specreg.kernels.triton_shim import tl, triton
from specreg.kernels.tree_verify_greedy import triton_outputs, triton_result
from specreg.kernels.tree_verify_greedy.checks import verify_tile
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs

if triton is not None:
    from specreg.kernels.race_tiles import block_sums, first_best
    from specreg.kernels.random_stream import exponential_of, key_words, token_word
    from specreg.kernels.tree_verify_greedy import walk_step, write_bonus

    BLOCK_KEY_BASE: tl.constexpr = tl.constexpr(1 << 31)
    RESIDUAL_ROLE: tl.constexpr = tl.constexpr(1)

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
    def _race_draw(p_ptr, q_ptr, row, vocab, coef, rrs, tried_tok, live, delta, k0, k1,
                   HAS_Q: tl.constexpr, DRAW_TILE: tl.constexpr):
        """The final token by the two-level exponential race on the random stream under the
        key lanes (k0, k1) (`specreg.kernels.tree_residual_draw`): one streamed read of the
        row races the blocks of the weights and of p (the fallback) at once, with the chain
        kernels' block sums and running race; then the winning block's 128 weights are read
        again and raced. A residual without mass draws from p."""
        NBT: tl.constexpr = DRAW_TILE // 128
        offs = tl.arange(0, DRAW_TILE)
        block_ids = tl.arange(0, NBT).to(tl.int64)
        best_p = tl.sum(tl.zeros([NBT], tl.float64), axis=0) - 1.0
        best_w = best_p
        best_pj = tl.sum(tl.zeros([NBT], tl.int64), axis=0)
        best_wj = best_pj
        any_w = best_pj != 0
        for v0 in range(0, vocab, DRAW_TILE):
            v = v0 + offs
            pv, w = _final_tile(p_ptr, q_ptr, row, v, vocab, coef, rrs, tried_tok, live, delta,
                                HAS_Q)
            j = v0 // 128 + block_ids
            noise = exponential_of(token_word(k0, k1, j + BLOCK_KEY_BASE)).to(tl.float64)
            p_mass = block_sums(pv, NBT)
            w_mass = block_sums(w, NBT)
            best_p, best_pj = first_best(p_mass.to(tl.float64) / noise, j, best_p, best_pj)
            best_w, best_wj = first_best(w_mass.to(tl.float64) / noise, j, best_w, best_wj)
            any_w = any_w | (tl.max(w_mass, axis=0) > 0)
        block = tl.where(any_w, best_wj, best_pj)
        cols = block * 128 + tl.arange(0, 128).to(tl.int64)
        inside = cols < vocab
        pv, w = _final_tile(p_ptr, q_ptr, row, cols, vocab, coef, rrs, tried_tok, live, delta,
                            HAS_Q)
        weights = tl.where(inside, tl.where(any_w, w, pv), 0.0)
        scores = weights.to(tl.float64) / exponential_of(token_word(k0, k1, cols)).to(tl.float64)
        top = tl.max(scores, axis=0)
        return tl.min(tl.where(scores == top, cols, 1 << 62), axis=0)

    @triton.jit
    def _tree_sampling_kernel(
        cand_ptr, ridx_ptr, nt_ptr, ns_ptr, p_ptr, q_ptr, coins_ptr, child_ptr, keys_ptr,
        positions_ptr, predicts_ptr, acc_ptr, num_ptr, bonus_ptr, out_ptr,
        vocab, depth, thr_single, thr_acc,
        N: tl.constexpr, HAS_Q: tl.constexpr, CAP: tl.constexpr, BLOCK_V: tl.constexpr,
        DRAW_TILE: tl.constexpr,
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
                u_child = tl.load(child_ptr + base + safe).to(tl.float32)
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
                coef = tl.where(reject & rrs, new_coef, coef)
                sibling = tl.load(ns_ptr + base + safe).to(tl.int64)
                if reject & rrs & (sibling >= 0):
                    # q's untried mass is summed over the untried tokens, in the same pass:
                    # subtracting each tried q(x) cancels once they hold nearly all of q.
                    live2 = idx < cnt
                    dense = tl.zeros([BLOCK_V], tl.float32)
                    untried = tl.zeros([BLOCK_V], tl.float32)
                    for v0 in range(0, vocab, BLOCK_V):
                        v = v0 + offs
                        pv = tl.load(p_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
                        qv = tl.load(q_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
                        dense += tl.maximum(pv - coef * qv, 0.0)
                        hit = (v[:, None] == tried_tok[None, :]) & live2[None, :]
                        untried += tl.where(tl.max(hit.to(tl.int32), axis=1) > 0, 0.0, qv)
                    q_left = tl.sum(untried, axis=0)
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

        # Final draw from the residual at `last`, keyed by (key, always the RESIDUAL role:
        # torch_impl.final_lanes, absolute position of the children of `last`).
        row = (base + last) * vocab
        k0, k1 = key_words(tl.load(keys_ptr + r), count * 0 + RESIDUAL_ROLE,
                           tl.load(positions_ptr + r) + count)
        live = idx < cnt
        if HAS_Q:
            frozen = tl.maximum(tried_p - tried_val * tried_q, 0.0)
            moving = tl.maximum(tried_p - coef * tried_q, 0.0)
            delta = tl.where(rrs, frozen - moving, -tried_p)
        else:
            delta = -tried_p
        delta = tl.where(live, delta, 0.0)
        bonus = _race_draw(p_ptr, q_ptr, row, vocab, coef, rrs, tried_tok, live, delta, k0, k1,
                           HAS_Q, DRAW_TILE)
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
    p = inputs.target_probs.contiguous()
    q = draft_probs.contiguous() if draft_probs is not None else p
    tile = verify_tile(vocab, block_v)
    if b > 0:
        _tree_sampling_kernel[(b,)](
            candidates.contiguous(), inputs.retrieve_index.contiguous(),
            inputs.next_token.contiguous(), inputs.next_sibling.contiguous(), p, q,
            inputs.coins.contiguous(), inputs.child_coins.contiguous(),
            inputs.keys.to(torch.int64).contiguous(), inputs.positions.to(torch.int64).contiguous(),
            *parts, vocab, depth, float(inputs.threshold_single),
            float(inputs.threshold_acc), N=n, HAS_Q=draft_probs is not None,
            CAP=max(triton.next_power_of_2(max(n - 1, 1)), 2), BLOCK_V=tile,
            DRAW_TILE=max(tile, RACE_BLOCK),
        )
    return triton_result(parts)
