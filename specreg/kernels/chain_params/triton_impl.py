"""The Triton implementation of chain verification under per-request sampling parameters.

One program per request: each reached row's filtering statistics are computed in tiles
(`specreg.kernels.filtering`'s `row_stats_tiles`); the acceptance test is u * q(x) < p(x),
exact in float64, on the filtered probabilities of the drafted token (`filtered_tile` at that
token: the float32 numbers the race reads there); the emitted token is drawn by the chain's
exponential race (`emit_token`: one pass over the filtered residual's blocks, then one block
again).
"""

from __future__ import annotations

from specreg.contract.filter_order import filter_rule
from specreg.kernels.chain import empty_outputs
from specreg.kernels.chain.types import ChainVerifyResult
from specreg.kernels.chain_params.types import ChainParamsInputs
from specreg.kernels.race_tiles import race_tile
from specreg.kernels.triton_shim import tl, triton

if triton is not None:
    from specreg.kernels.argmax import row_argmax_tiles
    from specreg.kernels.chain import emit_token, write_result
    from specreg.kernels.filtering import filtered_tile, row_stats_tiles

    @triton.jit
    def _chain_params_kernel(
        cand_ptr, stride_cb, stride_cn,
        p_ptr, stride_pb, stride_pn, stride_pv,
        q_ptr, stride_qb, stride_qn, stride_qv,
        coins_ptr, stride_ub, stride_un,
        keys_ptr, positions_ptr, vlens_ptr,
        temp_ptr, topk_ptr, topp_ptr, minp_ptr, invalid_ptr,
        accept_ptr, bonus_ptr, out_ptr,
        n, vocab,
        HAS_Q: tl.constexpr, HAS_VLENS: tl.constexpr, PROBS: tl.constexpr,
        BLOCK_V: tl.constexpr, BLOCK_N: tl.constexpr, ORDER: tl.constexpr,
        INVARIANT: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        limit = row * 0 + (n - 1)
        if HAS_VLENS:
            limit = tl.minimum(tl.maximum(tl.load(vlens_ptr + row).to(tl.int64) - 1, 0), n - 1)
        bad = tl.load(invalid_ptr + row) != 0
        limit = tl.where(bad, 0, limit)
        temperature = tl.load(temp_ptr + row).to(tl.float32)
        top_k = tl.load(topk_ptr + row).to(tl.int64)
        top_p = tl.load(topp_ptr + row).to(tl.float32)
        min_p = tl.load(minp_ptr + row).to(tl.float32)
        greedy = temperature == 0.0
        safe_t = tl.where(greedy | bad, 1.0, temperature)
        p_base = p_ptr + row * stride_pb
        q_base = q_ptr + row * stride_qb
        cand_base = cand_ptr + row * stride_cb
        zero = tl.sum(tl.zeros([BLOCK_V], tl.float32), axis=0)
        one = zero + 1.0
        p_shift, p_thr, p_norm = zero, zero, one
        q_shift, q_thr, q_norm = zero, zero, one
        predict = tl.max(tl.full([BLOCK_V], -1, tl.int64), axis=0)

        # Acceptance: walk the chain until the first rejection or the verify limit.
        i = limit * 0
        go = i < limit
        while go:
            token = tl.load(cand_base + (i + 1) * stride_cn).to(tl.int64)
            valid = (token >= 0) & (token < vocab)
            safe = tl.where(valid, token, 0)
            if greedy:
                predict = row_argmax_tiles(p_base + i * stride_pn, stride_pv, vocab, BLOCK_V)
                accepted = token == predict
            else:
                p_shift, p_thr, p_norm = row_stats_tiles(
                    p_base + i * stride_pn, stride_pv, vocab, safe_t, top_k, top_p, min_p,
                    PROBS, BLOCK_V, ORDER,
                )
                if INVARIANT:  # accept iff the draft is the target's own race draw
                    target_token = emit_token(
                        cand_base, stride_cn, p_base + i * stride_pn, stride_pv, p_base,
                        stride_pv, i, n, vocab, i < 0, safe_t, min_p,
                        p_shift, p_thr, p_norm, q_shift, q_thr, q_norm,
                        tl.load(keys_ptr + row), tl.load(positions_ptr + row) + i,
                        False, True, PROBS, BLOCK_V,
                    )
                    accepted = (token == target_token) & valid
                else:
                    p_x = filtered_tile(p_base + i * stride_pn, safe, valid, stride_pv, safe_t,
                                        p_shift, p_thr, p_norm, min_p, PROBS)
                    # u * q(x) < p(x) in float64: the product of two float32 numbers is exact
                    u = tl.load(coins_ptr + row * stride_ub + i * stride_un).to(tl.float32)
                    q_x = p_x * 0.0 + 1.0
                    if HAS_Q:
                        q_shift, q_thr, q_norm = row_stats_tiles(
                            q_base + i * stride_qn, stride_qv, vocab, safe_t, top_k, top_p,
                            min_p, PROBS, BLOCK_V, ORDER,
                        )
                        q_x = filtered_tile(q_base + i * stride_qn, safe, valid, stride_qv,
                                            safe_t, q_shift, q_thr, q_norm, min_p, PROBS)
                    accepted = (u.to(tl.float64) * q_x.to(tl.float64) < p_x.to(tl.float64))
                    accepted = accepted & valid
            i += accepted.to(tl.int64)
            go = accepted & (i < limit)

        rejected = i < limit
        if INVARIANT:  # the emitted token is the target's SAMPLE-role draw of the row
            rejected = i < 0
        p_row = p_base + i * stride_pn
        if greedy:
            if i >= limit:
                predict = row_argmax_tiles(p_row, stride_pv, vocab, BLOCK_V)
            token_out = predict
        else:
            if i >= limit:
                p_shift, p_thr, p_norm = row_stats_tiles(
                    p_row, stride_pv, vocab, safe_t, top_k, top_p, min_p, PROBS, BLOCK_V, ORDER
                )
            token_out = emit_token(
                cand_base, stride_cn, p_row, stride_pv, q_base + tl.minimum(i, n - 2) * stride_qn,
                stride_qv, i, n, vocab, rejected, safe_t, min_p,
                p_shift, p_thr, p_norm, q_shift, q_thr, q_norm,
                tl.load(keys_ptr + row), tl.load(positions_ptr + row) + i,
                HAS_Q, True, PROBS, BLOCK_V,
            )
        token_out = tl.where(bad, -1, token_out)
        write_result(
            cand_ptr, stride_cb, stride_cn, accept_ptr, bonus_ptr, out_ptr,
            row, n, i, token_out, BLOCK_N,
        )


def verify_chain_with_params_triton(
    inputs: ChainParamsInputs, *, block_v: int | None = None
) -> ChainVerifyResult:
    """Same contract as `verify_chain_with_params_torch`."""
    candidates, target, draft, params = (
        inputs.candidates, inputs.target, inputs.draft, inputs.params
    )
    coins, verify_lens = inputs.coins, inputs.verify_lens
    b, n, vocab = target.shape
    accept, bonus, out = empty_outputs(b, n, candidates.device)
    invalid = params.invalid_rows(vocab)
    if b == 0:
        return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out,
                                 param_error=invalid)
    has_q = draft is not None and n > 1 and not inputs.invariant
    q = draft if draft is not None and has_q else target
    q_strides = q.stride() if has_q else (0, 0, 0)
    if coins.shape[1] == 0:
        coins = inputs.keys[:, None]  # never read (no drafts); keeps the pointer valid
    _chain_params_kernel[(b,)](
        candidates, candidates.stride(0), candidates.stride(1),
        target, *target.stride(),
        q, *q_strides,
        coins, coins.stride(0), coins.stride(1),
        inputs.keys, inputs.positions, verify_lens if verify_lens is not None else candidates,
        params.temperature, params.top_k, params.top_p, params.min_p, invalid,
        accept, bonus, out,
        n, vocab,
        HAS_Q=has_q, HAS_VLENS=verify_lens is not None, PROBS=inputs.probabilities,
        BLOCK_V=race_tile(vocab, block_v), BLOCK_N=triton.next_power_of_2(n),
        ORDER=filter_rule(inputs.filter_order).code, INVARIANT=inputs.invariant, num_warps=4,
    )
    return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out,
                             param_error=invalid)
