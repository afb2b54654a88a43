"""The Triton implementation of relaxed, typical and synthetic chain acceptance: one program per request.

The walk is the chain kernel's with the rule's acceptance test (MODE: thresholds, typical,
synthetic); the token after the run is the chain family's race draw (`emit_token`) or the
row's argmax (`row_argmax_tiles`). Typical acceptance streams each row it tests once more for its
entropy. The vocabulary is streamed in BLOCK_V tiles with int64 offsets; no [b, n, V]
temporaries and no host synchronisation.
"""

from __future__ import annotations

from specreg.kernels.chain.types import ChainSamplingInputs, ChainVerifyResult
from specreg.kernels.relaxed.types import SYNTHETIC, THRESHOLDS, TYPICAL, RuleParams
from specreg.kernels.triton_shim import tl, triton

if triton is not None:
    from specreg.kernels.argmax import row_argmax_tiles
    from specreg.kernels.chain import emit_token, write_result

    @triton.jit
    def row_entropy_tiles(row_ptr, stride_v, vocab, BLOCK_V: tl.constexpr):
        """-sum p log p of one row (0 log 0 = 0), float32."""
        offs = tl.arange(0, BLOCK_V)
        acc = tl.zeros([BLOCK_V], tl.float32)
        for start in range(0, vocab, BLOCK_V):
            cols = (start + offs).to(tl.int64)
            p = tl.load(row_ptr + cols * stride_v, mask=cols < vocab, other=0.0).to(tl.float32)
            acc += tl.where(p > 0, -p * tl.log(tl.where(p > 0, p, 1.0)), 0.0)
        return tl.sum(acc, axis=0)

    @triton.jit
    def _relaxed_kernel(
        cand_ptr, stride_cb, stride_cn,
        p_ptr, stride_pb, stride_pn, stride_pv,
        q_ptr, stride_qb, stride_qn, stride_qv,
        coins_ptr, stride_ub, stride_un,
        keys_ptr, positions_ptr,
        vlens_ptr, rates_ptr, num_rates,
        accept_ptr, bonus_ptr, out_ptr,
        n, vocab, thr_single, thr_acc, post_thr, post_alpha,
        MODE: tl.constexpr, HAS_Q: tl.constexpr, HAS_VLENS: tl.constexpr,
        BLOCK_V: tl.constexpr, BLOCK_N: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        limit = row * 0 + (n - 1)
        if HAS_VLENS:
            limit = tl.minimum(tl.maximum(tl.load(vlens_ptr + row).to(tl.int64) - 1, 0), n - 1)
        p_base = p_ptr + row * stride_pb
        q_base = q_ptr + row * stride_qb
        cand_base = cand_ptr + row * stride_cb
        key = tl.load(keys_ptr + row)
        position = tl.load(positions_ptr + row)
        i = limit * 0
        go = i < limit
        if MODE == 2:
            first = tl.load(coins_ptr + row * stride_ub, mask=n > 1, other=1.0).to(tl.float32)
            while go:
                rate = tl.load(rates_ptr + i, mask=i < num_rates, other=0.0)
                accepted = first < rate
                i += accepted.to(tl.int64)
                go = accepted & (i < limit)
        else:
            while go:
                token = tl.load(cand_base + (i + 1) * stride_cn).to(tl.int64)
                valid = (token >= 0) & (token < vocab)
                safe = tl.where(valid, token, 0)
                p_x = tl.load(p_base + i * stride_pn + safe * stride_pv, mask=valid, other=0.0)
                p_x = p_x.to(tl.float32)
                coin = tl.load(coins_ptr + row * stride_ub + i * stride_un).to(tl.float32)
                if MODE == 0:
                    q_x = coin * 0.0 + 1.0
                    if HAS_Q:
                        q_x = tl.load(q_base + i * stride_qn + safe * stride_qv, mask=valid,
                                      other=0.0).to(tl.float32)
                    scaled = (coin * q_x) * thr_acc
                    accepted = ((scaled < p_x) | (p_x >= thr_single)) & valid
                else:
                    entropy = row_entropy_tiles(p_base + i * stride_pn, stride_pv, vocab, BLOCK_V)
                    cutoff = tl.minimum(post_thr, post_alpha * tl.exp(-entropy))
                    accepted = (p_x > cutoff) & valid
                i += accepted.to(tl.int64)
                go = accepted & (i < limit)
        rejected = i < limit
        if MODE == 0:
            token = emit_token(
                cand_base, stride_cn, p_base + i * stride_pn, stride_pv,
                q_base + tl.minimum(i, n - 2) * stride_qn, stride_qv, i, n, vocab, rejected,
                1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, key, position + i,
                HAS_Q, False, False, BLOCK_V,
            )
        else:
            token = emit_token(
                cand_base, stride_cn, p_base + i * stride_pn, stride_pv,
                p_base, stride_pv, i, n, vocab, i < 0,
                1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, key, position + i,
                False, False, False, BLOCK_V,
            )
            if MODE == 1:
                if rejected:
                    token = row_argmax_tiles(
                        p_base + i * stride_pn, stride_pv, vocab, BLOCK_V
                    ).to(tl.int64)
        write_result(
            cand_ptr, stride_cb, stride_cn, accept_ptr, bonus_ptr, out_ptr,
            row, n, i, token, BLOCK_N,
        )


def verify_chain_relaxed_triton(
    inputs: ChainSamplingInputs, params: RuleParams, *, block_v: int | None = None
) -> ChainVerifyResult:
    """Same contract as `verify_chain_relaxed_torch`."""
    from specreg.kernels.chain import empty_outputs
    from specreg.kernels.race_tiles import race_tile

    candidates, target, draft = inputs.candidates, inputs.target_probs, inputs.draft_probs
    coins, verify_lens = inputs.coins, inputs.verify_lens
    b, n, vocab = target.shape
    accept, bonus, out = empty_outputs(b, n, candidates.device)
    if b == 0:
        return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out)
    has_q = draft is not None and params.mode == THRESHOLDS
    q = draft if has_q else target
    q_strides = draft.stride() if has_q else (0, 0, 0)
    if coins.shape[1] == 0:
        coins = inputs.keys[:, None]  # never read (no drafts); keeps the pointer valid
    rates = params.rates_tensor(candidates.device)
    assert params.mode in (THRESHOLDS, TYPICAL, SYNTHETIC)
    _relaxed_kernel[(b,)](
        candidates, candidates.stride(0), candidates.stride(1),
        target, *target.stride(),
        q, *q_strides,
        coins, coins.stride(0), coins.stride(1),
        inputs.keys, inputs.positions,
        verify_lens if verify_lens is not None else candidates, rates, len(params.rates),
        accept, bonus, out,
        n, vocab, float(params.threshold_single), float(params.threshold_acc),
        float(params.posterior_threshold), float(params.posterior_alpha),
        MODE=params.mode, HAS_Q=has_q, HAS_VLENS=verify_lens is not None,
        BLOCK_V=race_tile(vocab, block_v), BLOCK_N=triton.next_power_of_2(n), num_warps=4,
    )
    return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out)

