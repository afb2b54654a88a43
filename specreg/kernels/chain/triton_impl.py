"""The Triton implementation of chain verification: one program per request.

The vocabulary is streamed in BLOCK_V tiles (`vocab_tile`, at least one race block of 128) with
int64 offsets; the correction / bonus draw is the two-level exponential race on the random
stream (one pass over the row, then one 128-token block again); no [b, n, V] temporaries and
no host synchronisation. The row argmax is the core's one device function
(`specreg.kernels.argmax`'s `row_argmax_tiles`), the race's block sums and running winner
`specreg.kernels.race_tiles`; `emit_token` (the race drawing the emitted token, from stored or
filtered rows) and `write_result` are shared, through the family's entry, with the
sampling-parameter and relaxed kernels (`chain_params`, `relaxed`).
"""

from __future__ import annotations

import torch

from specreg.kernels.chain.types import ChainSamplingInputs, ChainVerifyResult
from specreg.kernels.race_tiles import race_tile
from specreg.kernels.triton_shim import tl, triton, vocab_tile

if triton is not None:
    from specreg.kernels.argmax import row_argmax_tiles
    from specreg.kernels.filtering import filtered_tile
    from specreg.kernels.race_tiles import block_sums, first_best
    from specreg.kernels.random_stream import exponential_of, key_words, token_word

    BLOCK_KEY_BASE: tl.constexpr = tl.constexpr(1 << 31)
    SAMPLE_ROLE: tl.constexpr = tl.constexpr(0)
    RESIDUAL_ROLE: tl.constexpr = tl.constexpr(1)

    @triton.jit
    def tile_probs(row_ptr, cols, inside, stride_v, temperature, shift, threshold, norm, min_p,
                   FILTERED: tl.constexpr, PROBS: tl.constexpr):
        """One tile of a row's probabilities: as stored, or filtered by the request's sampling
        parameters (`FILTERED`, with the row's statistics from `row_stats`)."""
        if FILTERED:
            values = filtered_tile(row_ptr, cols, inside, stride_v, temperature, shift,
                                   threshold, norm, min_p, PROBS)
        else:
            values = tl.load(row_ptr + cols * stride_v, mask=inside, other=0.0).to(tl.float32)
        return values

    @triton.jit
    def residual_tile(
        p_row, stride_pv, q_row, stride_qv, cols, inside, read_q, excluded, temperature, min_p,
        p_shift, p_thr, p_norm, q_shift, q_thr, q_norm,
        HAS_Q: tl.constexpr, FILTERED: tl.constexpr, PROBS: tl.constexpr,
    ):
        """p of one tile and its residual: max(p - q, 0) (q read only where `read_q`), or p
        without the `excluded` token (the target-only rule)."""
        pv = tile_probs(p_row, cols, inside, stride_pv, temperature, p_shift, p_thr, p_norm,
                        min_p, FILTERED, PROBS)
        if HAS_Q:
            qv = tile_probs(q_row, cols, inside & read_q, stride_qv, temperature, q_shift, q_thr,
                            q_norm, min_p, FILTERED, PROBS)
            rv = tl.maximum(pv - qv, 0.0)
        else:
            rv = tl.where(cols == excluded, 0.0, pv)
        return pv, rv

    @triton.jit
    def emit_token(
        cand_base, stride_cn, p_row, stride_pv, q_row, stride_qv, i, n, vocab, rejected,
        temperature, min_p, p_shift, p_thr, p_norm, q_shift, q_thr, q_norm, key, position,
        HAS_Q: tl.constexpr, FILTERED: tl.constexpr, PROBS: tl.constexpr, BLOCK_V: tl.constexpr,
    ):
        """The token a request emits at row i, by the two-level exponential race on the random
        stream keyed by (request `key`, role, absolute `position` of row i): the RESIDUAL role
        after a rejection, the SAMPLE role otherwise. One pass over the vocabulary races the
        blocks of the residual (after a rejection) and of p at once, then the winning block's
        128 weights are read again and raced; a residual without mass draws from p. Every chain
        kernel shares it."""
        NBT: tl.constexpr = BLOCK_V // 128
        k0, k1 = key_words(key, tl.where(rejected, RESIDUAL_ROLE, SAMPLE_ROLE), position)
        excluded = tl.load(
            cand_base + (i + 1) * stride_cn, mask=rejected & ((i + 1) < n), other=-1
        ).to(tl.int64)
        offs = tl.arange(0, BLOCK_V)
        block_ids = tl.arange(0, NBT).to(tl.int64)
        best_p = tl.sum(tl.zeros([NBT], tl.float64), axis=0) - 1.0
        best_r = best_p
        best_pj = tl.sum(tl.zeros([NBT], tl.int64), axis=0)
        best_rj = best_pj
        any_r = best_pj != 0
        for start in range(0, vocab, BLOCK_V):
            cols = (start + offs).to(tl.int64)
            inside = cols < vocab
            pv, rv = residual_tile(
                p_row, stride_pv, q_row, stride_qv, cols, inside, rejected, excluded,
                temperature, min_p, p_shift, p_thr, p_norm, q_shift, q_thr, q_norm,
                HAS_Q, FILTERED, PROBS,
            )
            j = start // 128 + block_ids
            noise = exponential_of(token_word(k0, k1, j + BLOCK_KEY_BASE)).to(tl.float64)
            p_mass = block_sums(pv, NBT)
            r_mass = block_sums(rv, NBT)
            best_p, best_pj = first_best(p_mass.to(tl.float64) / noise, j, best_p, best_pj)
            best_r, best_rj = first_best(r_mass.to(tl.float64) / noise, j, best_r, best_rj)
            any_r = any_r | (tl.max(r_mass, axis=0) > 0)
        use_residual = rejected & any_r
        block = tl.where(use_residual, best_rj, best_pj)
        cols = block * 128 + tl.arange(0, 128).to(tl.int64)
        inside = cols < vocab
        pv, rv = residual_tile(
            p_row, stride_pv, q_row, stride_qv, cols, inside, use_residual, excluded,
            temperature, min_p, p_shift, p_thr, p_norm, q_shift, q_thr, q_norm,
            HAS_Q, FILTERED, PROBS,
        )
        weights = tl.where(inside, tl.where(use_residual, rv, pv), 0.0)
        noise = exponential_of(token_word(k0, k1, cols)).to(tl.float64)
        scores = weights.to(tl.float64) / noise
        top = tl.max(scores, axis=0)
        return tl.min(tl.where(scores == top, cols, 1 << 62), axis=0)

    @triton.jit
    def write_result(
        cand_ptr, stride_cb, stride_cn, accept_ptr, bonus_ptr, out_ptr,
        row, n, accepted, bonus, BLOCK_N: tl.constexpr,
    ):
        j = tl.arange(0, BLOCK_N)
        drafts = tl.load(
            cand_ptr + row * stride_cb + (j + 1).to(tl.int64) * stride_cn,
            mask=(j + 1) < n,
            other=-1,
        ).to(tl.int64)
        minus_one = tl.full([BLOCK_N], -1, tl.int64)
        out = tl.where(j < accepted, drafts, tl.where(j == accepted, bonus, minus_one))
        tl.store(out_ptr + row * n + j, out, mask=j < n)
        tl.store(accept_ptr + row, accepted.to(tl.int32))
        tl.store(bonus_ptr + row, bonus)

    @triton.jit
    def _chain_greedy_kernel(
        cand_ptr, stride_cb, stride_cn,
        logits_ptr, stride_lb, stride_ln, stride_lv,
        vlens_ptr,
        accept_ptr, bonus_ptr, out_ptr,
        n, vocab,
        HAS_VLENS: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_N: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        limit = row * 0 + (n - 1)
        if HAS_VLENS:
            limit = tl.minimum(tl.maximum(tl.load(vlens_ptr + row).to(tl.int64) - 1, 0), n - 1)
        base = logits_ptr + row * stride_lb
        i = limit * 0
        predict = row_argmax_tiles(base, stride_lv, vocab, BLOCK_V)
        nxt = tl.load(cand_ptr + row * stride_cb + stride_cn, mask=n > 1, other=-1).to(tl.int64)
        go = (i < limit) & (nxt == predict)
        while go:
            i += 1
            predict = row_argmax_tiles(base + i * stride_ln, stride_lv, vocab, BLOCK_V)
            nxt = tl.load(
                cand_ptr + row * stride_cb + (i + 1) * stride_cn, mask=(i + 1) < n, other=-1
            ).to(tl.int64)
            go = (i < limit) & (nxt == predict)
        write_result(
            cand_ptr, stride_cb, stride_cn, accept_ptr, bonus_ptr, out_ptr,
            row, n, i, predict, BLOCK_N,
        )

    @triton.jit
    def _chain_sampling_kernel(
        cand_ptr, stride_cb, stride_cn,
        p_ptr, stride_pb, stride_pn, stride_pv,
        q_ptr, stride_qb, stride_qn, stride_qv,
        coins_ptr, stride_ub, stride_un,
        keys_ptr, positions_ptr,
        vlens_ptr,
        accept_ptr, bonus_ptr, out_ptr,
        n, vocab,
        HAS_Q: tl.constexpr, HAS_VLENS: tl.constexpr,
        BLOCK_V: tl.constexpr, BLOCK_N: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        limit = row * 0 + (n - 1)
        if HAS_VLENS:
            limit = tl.minimum(tl.maximum(tl.load(vlens_ptr + row).to(tl.int64) - 1, 0), n - 1)
        p_base = p_ptr + row * stride_pb
        q_base = q_ptr + row * stride_qb
        cand_base = cand_ptr + row * stride_cb

        # Acceptance: walk the chain until the first rejection or the verify limit.
        i = limit * 0
        go = i < limit
        while go:
            token = tl.load(cand_base + (i + 1) * stride_cn).to(tl.int64)
            valid = (token >= 0) & (token < vocab)
            safe = tl.where(valid, token, 0)
            p_x = tl.load(p_base + i * stride_pn + safe * stride_pv, mask=valid, other=0.0)
            p_x = p_x.to(tl.float32)
            coin = tl.load(coins_ptr + row * stride_ub + i * stride_un).to(tl.float32)
            if HAS_Q:
                q_x = tl.load(q_base + i * stride_qn + safe * stride_qv, mask=valid, other=0.0)
                accepted = (coin * q_x.to(tl.float32) < p_x) & valid
            else:
                accepted = (coin < p_x) & valid
            i += accepted.to(tl.int64)
            go = accepted & (i < limit)

        # The emitted token: residual of row i after a rejection, p of row i otherwise.
        token = emit_token(
            cand_base, stride_cn, p_base + i * stride_pn, stride_pv,
            q_base + tl.minimum(i, n - 2) * stride_qn, stride_qv, i, n, vocab, i < limit,
            1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0,
            tl.load(keys_ptr + row), tl.load(positions_ptr + row) + i,
            HAS_Q, False, False, BLOCK_V,
        )
        write_result(
            cand_ptr, stride_cb, stride_cn, accept_ptr, bonus_ptr, out_ptr,
            row, n, i, token, BLOCK_N,
        )


    @triton.jit
    def _chain_invariant_kernel(
        cand_ptr, stride_cb, stride_cn,
        p_ptr, stride_pb, stride_pn, stride_pv,
        keys_ptr, positions_ptr, vlens_ptr,
        accept_ptr, bonus_ptr, out_ptr,
        n, vocab,
        HAS_VLENS: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_N: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        limit = row * 0 + (n - 1)
        if HAS_VLENS:
            limit = tl.minimum(tl.maximum(tl.load(vlens_ptr + row).to(tl.int64) - 1, 0), n - 1)
        p_base = p_ptr + row * stride_pb
        cand_base = cand_ptr + row * stride_cb
        key = tl.load(keys_ptr + row)
        position = tl.load(positions_ptr + row)
        never = limit < 0
        # The target's token of row i: the SAMPLE-role race of p (emit_token, not rejected).
        i = limit * 0
        token = emit_token(
            cand_base, stride_cn, p_base, stride_pv, p_base, stride_pv, i, n, vocab, never,
            1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, key, position,
            False, False, False, BLOCK_V,
        )
        draft = tl.load(cand_base + (i + 1) * stride_cn, mask=i < limit, other=-1).to(tl.int64)
        go = (i < limit) & (draft == token)
        while go:
            i += 1
            token = emit_token(
                cand_base, stride_cn, p_base + i * stride_pn, stride_pv, p_base, stride_pv,
                i, n, vocab, never, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 1.0, key, position + i,
                False, False, False, BLOCK_V,
            )
            draft = tl.load(
                cand_base + (i + 1) * stride_cn, mask=i < limit, other=-1
            ).to(tl.int64)
            go = (i < limit) & (draft == token)
        write_result(
            cand_ptr, stride_cb, stride_cn, accept_ptr, bonus_ptr, out_ptr,
            row, n, i, token, BLOCK_N,
        )


def empty_outputs(b: int, n: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """accept_len int32 [b], bonus int64 [b] and output_tokens int64 [b, n], to be written."""
    return (
        torch.empty(b, dtype=torch.int32, device=device),
        torch.empty(b, dtype=torch.int64, device=device),
        torch.empty((b, n), dtype=torch.int64, device=device),
    )


def verify_chain_greedy_triton(
    candidates: torch.Tensor,
    target_logits: torch.Tensor,
    *,
    verify_lens: torch.Tensor | None,
    block_v: int | None = None,
) -> ChainVerifyResult:
    b, n, vocab = target_logits.shape
    accept, bonus, out = empty_outputs(b, n, candidates.device)
    if b == 0:
        return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out)
    _chain_greedy_kernel[(b,)](
        candidates, candidates.stride(0), candidates.stride(1),
        target_logits, *target_logits.stride(),
        verify_lens if verify_lens is not None else candidates,
        accept, bonus, out,
        n, vocab,
        HAS_VLENS=verify_lens is not None,
        BLOCK_V=vocab_tile(vocab, block_v),
        BLOCK_N=triton.next_power_of_2(n),
        num_warps=8,
    )
    return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out)


def verify_chain_sampling_triton(
    inputs: ChainSamplingInputs, *, block_v: int | None = None
) -> ChainVerifyResult:
    """Same contract as `verify_chain_sampling_torch` (None draft_probs: target-only rule)."""
    candidates, target_probs, draft_probs = (
        inputs.candidates, inputs.target_probs, inputs.draft_probs
    )
    coins, verify_lens = inputs.coins, inputs.verify_lens
    b, n, vocab = target_probs.shape
    accept, bonus, out = empty_outputs(b, n, candidates.device)
    if b == 0:
        return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out)
    q = draft_probs if draft_probs is not None else target_probs
    q_strides = draft_probs.stride() if draft_probs is not None else (0, 0, 0)
    if coins.shape[1] == 0:
        coins = inputs.keys[:, None]  # never read (no drafts); keeps the pointer valid
    _chain_sampling_kernel[(b,)](
        candidates, candidates.stride(0), candidates.stride(1),
        target_probs, *target_probs.stride(),
        q, *q_strides,
        coins, coins.stride(0), coins.stride(1),
        inputs.keys, inputs.positions,
        verify_lens if verify_lens is not None else candidates,
        accept, bonus, out,
        n, vocab,
        HAS_Q=draft_probs is not None,
        HAS_VLENS=verify_lens is not None,
        BLOCK_V=race_tile(vocab, block_v),
        BLOCK_N=triton.next_power_of_2(n),
        num_warps=4,
    )
    return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out)


def verify_chain_invariant_triton(
    inputs: ChainSamplingInputs, *, block_v: int | None = None
) -> ChainVerifyResult:
    """Same contract as `verify_chain_invariant_torch`: one program per request."""
    candidates, target_probs, verify_lens = (
        inputs.candidates, inputs.target_probs, inputs.verify_lens
    )
    b, n, vocab = target_probs.shape
    accept, bonus, out = empty_outputs(b, n, candidates.device)
    if b == 0:
        return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out)
    _chain_invariant_kernel[(b,)](
        candidates, candidates.stride(0), candidates.stride(1),
        target_probs, *target_probs.stride(),
        inputs.keys, inputs.positions,
        verify_lens if verify_lens is not None else candidates,
        accept, bonus, out,
        n, vocab,
        HAS_VLENS=verify_lens is not None,
        BLOCK_V=race_tile(vocab, block_v),
        BLOCK_N=triton.next_power_of_2(n),
        num_warps=4,
    )
    return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out)
