"""Chain verification under per-request sampling parameters: greedy and sampled requests mixed.

`verify_chain_with_params(candidates, target, draft, params=...)` takes the target's and the
draft's raw scores ([b, n, V] and [b, n-1, V]: logits, or probabilities with
`probabilities=True`) and a `SamplingParams` batch. Per request:

- temperature 0: the greedy rule of `verify_chain_greedy` on the target scores (draft ignored,
  no coins used), so the tokens equal plain greedy decoding;
- temperature > 0: the chain rules of `verify_chain_sampling` (classic with a draft, target-only
  without) on p = filter(target / T) and q = filter(draft / T), filtered by the same rule
  (`specreg.kernels.filtering`). The drafts must have been sampled from that filtered q; the
  emitted tokens then follow the filtered, temperature-scaled target exactly.

Coins come from `request_coins`: a seeded request's coins depend only on its seed and offset, so
its tokens do not depend on the rest of the batch. Neither path builds a filtered [b, n, V]
tensor: the torch path walks positions over the requests still accepting and filters only the
rows they reach, chunk by chunk; the Triton kernel (one program per request) computes each
reached row's statistics in tiles and reads filtered probabilities on the fly.
"""

from __future__ import annotations

import torch

from specreg.errors import KernelInputError, problem
from specreg.kernels.chain import (
    BackendChoice,
    ChainVerifyResult,
    _assemble,
    _block_v,
    _check_chain,
    _choose_backend,
    _limits,
    _outputs,
    _verified_positions,
    check_coin_values,
)
from specreg.kernels.checks import check_index_range, should_check_values
from specreg.kernels.filtering.torch_impl import (
    FILTER_CHUNK_ELEMENTS,
    RowStats,
    filtered_probs_at,
    filtered_rows,
    gathered_row_stats,
)
from specreg.kernels.sampling import cpu_row_chunks, inverse_cdf_from_cdf
from specreg.kernels.sampling_params import SamplingParams, request_coins, require_params

try:
    import triton
    import triton.language as tl

    from specreg.kernels.chain import _row_argmax, _write_result
    from specreg.kernels.filtering.triton_impl import filtered_tile, row_stats
except ImportError:  # pragma: no cover - triton is optional
    triton = None
    tl = None


# --------------------------------------------------------------------------------------------
# Torch implementation: positions walked over the requests still accepting


class _Rows:
    """One input's [b * m, V] rows with the per-request parameters, for gathered access."""

    def __init__(self, scores: torch.Tensor, width: int, params: SamplingParams, probs: bool):
        self.flat = scores.reshape(-1, scores.shape[-1])
        self.width = width
        self.params = params
        self.probs = probs

    def stats(self, requests: torch.Tensor, position: int) -> RowStats:
        p = self.params
        return gathered_row_stats(
            self.flat, requests * self.width + position, p.temperature[requests],
            p.top_k[requests], p.top_p[requests], p.min_p[requests], probabilities=self.probs,
        )

    def prob_at(
        self, requests: torch.Tensor, position: int, tokens: torch.Tensor, stats: RowStats
    ) -> torch.Tensor:
        vocab = self.flat.shape[-1]
        safe = tokens.clamp(0, vocab - 1)
        scores = self.flat[requests * self.width + position, safe]
        p = self.params
        return filtered_probs_at(
            scores, p.temperature[requests], stats, p.min_p[requests], probabilities=self.probs
        )

    def filtered(self, requests: torch.Tensor, position: int, stats: RowStats) -> torch.Tensor:
        p = self.params
        rows = self.flat.index_select(0, requests * self.width + position)
        return filtered_rows(
            rows, p.temperature[requests], stats, p.min_p[requests], probabilities=self.probs
        )


def _select(stats: RowStats, index: torch.Tensor) -> RowStats:
    return RowStats(
        shift=stats.shift[index], threshold=stats.threshold[index], norm=stats.norm[index]
    )


def verify_chain_with_params_torch(
    candidates: torch.Tensor,
    target: torch.Tensor,
    draft: torch.Tensor | None,
    params: SamplingParams,
    coins: torch.Tensor,
    final_coins: torch.Tensor,
    *,
    verify_lens: torch.Tensor | None,
    probabilities: bool,
) -> ChainVerifyResult:
    b, n, vocab = target.shape
    device = candidates.device
    limit = _limits(verify_lens, b, n, device)
    drafts = candidates[:, 1:].to(torch.int64)
    invalid = params.invalid_rows(vocab)
    greedy = params.greedy
    p_rows = _Rows(target, n, params, probabilities)
    q_rows = _Rows(draft, n - 1, params, probabilities) if draft is not None and n > 1 else None
    accept_len = torch.zeros(b, dtype=torch.int64, device=device)
    bonus = torch.full((b,), -1, dtype=torch.int64, device=device)
    active = (~invalid).nonzero().flatten()
    for i in range(n):
        if active.numel() == 0:
            break
        checking = limit[active] > i
        if i < n - 1:
            token = torch.where(checking, drafts[active, i], -1)
        else:
            token = torch.full_like(active, -1)
        valid = (token >= 0) & (token < vocab)
        is_greedy = greedy[active]
        accepted = torch.zeros_like(checking)
        # Greedy requests: the target argmax of row i.
        g = is_greedy.nonzero().flatten()
        if g.numel():
            rows = p_rows.flat.index_select(0, active[g] * n + i)
            predict = torch.argmax(rows, dim=-1)
            accepted[g] = checking[g] & (token[g] == predict)
            stop = ~accepted[g]
            bonus[active[g][stop]] = predict[stop]
        # Sampled requests: filtered p(x), q(x) and the coin.
        s = (~is_greedy).nonzero().flatten()
        if s.numel():
            requests = active[s]
            p_stats = p_rows.stats(requests, i)
            p_x = p_rows.prob_at(requests, i, token[s], p_stats)
            check_s = checking[s]
            q_x = torch.ones_like(p_x)
            q_stats = None
            tested = check_s.nonzero().flatten()
            if q_rows is not None and tested.numel():
                q_stats = RowStats(
                    shift=torch.zeros_like(p_x), threshold=torch.full_like(p_x, float("-inf")),
                    norm=torch.ones_like(p_x),
                )
                tested_stats = q_rows.stats(requests[tested], i)
                q_stats.shift[tested] = tested_stats.shift
                q_stats.threshold[tested] = tested_stats.threshold
                q_stats.norm[tested] = tested_stats.norm
                q_x[tested] = q_rows.prob_at(requests[tested], i, token[s][tested], tested_stats)
            coin = coins[requests, i] if i < n - 1 else torch.zeros_like(p_x)
            ok = check_s & valid[s] & (coin.to(torch.float32) * q_x < p_x)
            accepted[s] = ok
            stop = (~ok).nonzero().flatten()
            if stop.numel():
                bonus[requests[stop]] = _emit(
                    p_rows, q_rows, requests[stop], i, _select(p_stats, stop),
                    None if q_stats is None else _select(q_stats, stop),
                    rejected=check_s[stop], excluded=token[s][stop],
                    final_coins=final_coins[requests[stop]],
                )
        active = active[accepted]
        accept_len[active] = i + 1
    result = _assemble(candidates, accept_len, bonus)
    return ChainVerifyResult(
        accept_len=result.accept_len, bonus=result.bonus, output_tokens=result.output_tokens,
        param_error=invalid,
    )


def _emit(
    p_rows: _Rows,
    q_rows: _Rows | None,
    requests: torch.Tensor,
    position: int,
    p_stats: RowStats,
    q_stats: RowStats | None,
    *,
    rejected: torch.Tensor,
    excluded: torch.Tensor,
    final_coins: torch.Tensor,
) -> torch.Tensor:
    """The emitted token of `requests` stopping at `position`: from the residual
    max(p - q, 0) (or p without the draft, target-only) after a rejection, from p otherwise;
    a residual without mass falls back to p. Row chunks, one inverse-CDF draw each."""
    vocab = p_rows.flat.shape[-1]
    out = torch.empty(requests.shape[0], dtype=torch.int64)
    for start, stop in cpu_row_chunks(requests.shape[0], vocab, FILTER_CHUNK_ELEMENTS):
        part = slice(start, stop)
        chunk = torch.arange(start, stop)
        p = p_rows.filtered(requests[part], position, _select(p_stats, chunk))
        weights = p
        hit = rejected[part]
        if q_rows is not None and q_stats is not None:
            q = q_rows.filtered(requests[part], min(position, q_rows.width - 1),
                                _select(q_stats, chunk))
            residual = (p - q).clamp_min_(0.0)
        else:
            residual = p.clone()
            token = excluded[part]
            hit = hit & (token >= 0) & (token < vocab)
            rows = hit.nonzero().flatten()
            residual[rows, token[rows]] = 0.0
        use_residual = hit & (residual.sum(-1) > 0)
        weights = torch.where(use_residual[:, None], residual, p)
        cdf = torch.cumsum(weights, -1)
        out[part] = inverse_cdf_from_cdf(weights, cdf, final_coins[part], nonnegative=True)
    return out


# --------------------------------------------------------------------------------------------
# Triton implementation: one program per request

if triton is not None:

    @triton.jit
    def _chain_params_kernel(
        cand_ptr, stride_cb, stride_cn,
        p_ptr, stride_pb, stride_pn, stride_pv,
        q_ptr, stride_qb, stride_qn, stride_qv,
        coins_ptr, stride_ub, stride_un,
        final_ptr, vlens_ptr,
        temp_ptr, topk_ptr, topp_ptr, minp_ptr, invalid_ptr,
        accept_ptr, bonus_ptr, out_ptr,
        n, vocab,
        HAS_Q: tl.constexpr, HAS_VLENS: tl.constexpr, PROBS: tl.constexpr,
        BLOCK_V: tl.constexpr, BLOCK_N: tl.constexpr,
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
                predict = _row_argmax(p_base + i * stride_pn, stride_pv, vocab, BLOCK_V)
                accepted = token == predict
            else:
                p_shift, p_thr, p_norm = row_stats(
                    p_base + i * stride_pn, stride_pv, vocab, safe_t, top_k, top_p, min_p,
                    PROBS, BLOCK_V,
                )
                p_x = filtered_tile(p_base + i * stride_pn, safe, valid, stride_pv, safe_t,
                                    p_shift, p_thr, p_norm, min_p, PROBS)
                coin = tl.load(coins_ptr + row * stride_ub + i * stride_un).to(tl.float32)
                if HAS_Q:
                    q_shift, q_thr, q_norm = row_stats(
                        q_base + i * stride_qn, stride_qv, vocab, safe_t, top_k, top_p, min_p,
                        PROBS, BLOCK_V,
                    )
                    q_x = filtered_tile(q_base + i * stride_qn, safe, valid, stride_qv, safe_t,
                                        q_shift, q_thr, q_norm, min_p, PROBS)
                    accepted = (coin * q_x < p_x) & valid
                else:
                    accepted = (coin < p_x) & valid
            i += accepted.to(tl.int64)
            go = accepted & (i < limit)

        rejected = i < limit
        p_row = p_base + i * stride_pn
        if greedy:
            if i >= limit:
                predict = _row_argmax(p_row, stride_pv, vocab, BLOCK_V)
            token_out = predict
        else:
            if i >= limit:
                p_shift, p_thr, p_norm = row_stats(
                    p_row, stride_pv, vocab, safe_t, top_k, top_p, min_p, PROBS, BLOCK_V
                )
            token_out = _emit_filtered(
                cand_base, stride_cn, p_row, stride_pv, q_base + tl.minimum(i, n - 2) * stride_qn,
                stride_qv, i, n, vocab, rejected, safe_t, min_p,
                p_shift, p_thr, p_norm, q_shift, q_thr, q_norm,
                tl.load(final_ptr + row).to(tl.float32), HAS_Q, PROBS, BLOCK_V,
            )
        token_out = tl.where(bad, -1, token_out)
        _write_result(
            cand_ptr, stride_cb, stride_cn, accept_ptr, bonus_ptr, out_ptr,
            row, n, i, token_out, BLOCK_N,
        )

    @triton.jit
    def _residual_tile(
        p_row, stride_pv, q_row, stride_qv, cols, inside, read_q, excluded, temperature, min_p,
        p_shift, p_thr, p_norm, q_shift, q_thr, q_norm, HAS_Q: tl.constexpr, PROBS: tl.constexpr,
    ):
        """Filtered p of one tile and its residual: max(p - q, 0) (q read only when `read_q`),
        or p without the `excluded` token (target-only rule)."""
        pv = filtered_tile(p_row, cols, inside, stride_pv, temperature, p_shift, p_thr, p_norm,
                           min_p, PROBS)
        if HAS_Q:
            qv = filtered_tile(q_row, cols, inside & read_q, stride_qv, temperature, q_shift,
                               q_thr, q_norm, min_p, PROBS)
            rv = tl.maximum(pv - qv, 0.0)
        else:
            rv = tl.where(cols == excluded, 0.0, pv)
        return pv, rv

    @triton.jit
    def _emit_filtered(
        cand_base, stride_cn, p_row, stride_pv, q_row, stride_qv, i, n, vocab, rejected,
        temperature, min_p, p_shift, p_thr, p_norm, q_shift, q_thr, q_norm, coin,
        HAS_Q: tl.constexpr, PROBS: tl.constexpr, BLOCK_V: tl.constexpr,
    ):
        """Inverse-CDF draw from the filtered residual (after a rejection) or p, in two passes."""
        excluded = tl.load(
            cand_base + (i + 1) * stride_cn, mask=rejected & ((i + 1) < n), other=-1
        ).to(tl.int64)
        offs = tl.arange(0, BLOCK_V)
        sum_p = tl.zeros([BLOCK_V], tl.float32)
        sum_r = tl.zeros([BLOCK_V], tl.float32)
        for start in range(0, vocab, BLOCK_V):
            cols = (start + offs).to(tl.int64)
            inside = cols < vocab
            pv, rv = _residual_tile(
                p_row, stride_pv, q_row, stride_qv, cols, inside, rejected, excluded,
                temperature, min_p, p_shift, p_thr, p_norm, q_shift, q_thr, q_norm, HAS_Q, PROBS,
            )
            sum_p += pv
            sum_r += rv
        total_r = tl.sum(sum_r, axis=0)
        use_residual = rejected & (total_r > 0)
        total = tl.where(use_residual, total_r, tl.sum(sum_p, axis=0))
        threshold = coin * total
        running = tl.sum(tl.zeros([BLOCK_V], tl.float32), axis=0)
        first = tl.min(tl.full([BLOCK_V], vocab, tl.int64), axis=0)
        last = tl.max(tl.full([BLOCK_V], -1, tl.int64), axis=0)
        for start in range(0, vocab, BLOCK_V):
            cols = (start + offs).to(tl.int64)
            inside = cols < vocab
            pv, rv = _residual_tile(
                p_row, stride_pv, q_row, stride_qv, cols, inside, use_residual, excluded,
                temperature, min_p, p_shift, p_thr, p_norm, q_shift, q_thr, q_norm, HAS_Q, PROBS,
            )
            weights = tl.where(use_residual, rv, pv)
            cdf = tl.cumsum(weights, axis=0) + running
            hit = (cdf > threshold) & (weights > 0)
            first = tl.minimum(first, tl.min(tl.where(hit, cols, vocab), axis=0))
            last = tl.maximum(last, tl.max(tl.where(weights > 0, cols, -1), axis=0))
            running += tl.sum(weights, axis=0)
        return tl.where(first < vocab, first, tl.maximum(last, 0))


def verify_chain_with_params_triton(
    candidates: torch.Tensor,
    target: torch.Tensor,
    draft: torch.Tensor | None,
    params: SamplingParams,
    coins: torch.Tensor,
    final_coins: torch.Tensor,
    *,
    verify_lens: torch.Tensor | None,
    probabilities: bool,
    block_v: int | None = None,
) -> ChainVerifyResult:
    """Same contract as `verify_chain_with_params_torch`."""
    b, n, vocab = target.shape
    accept, bonus, out = _outputs(b, n, candidates.device)
    invalid = params.invalid_rows(vocab)
    if b == 0:
        return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out,
                                 param_error=invalid)
    has_q = draft is not None and n > 1
    q = draft if draft is not None and has_q else target
    q_strides = q.stride() if has_q else (0, 0, 0)
    if coins.shape[1] == 0:
        coins = final_coins[:, None]  # never read (no drafts); keeps the pointer valid
    _chain_params_kernel[(b,)](
        candidates, candidates.stride(0), candidates.stride(1),
        target, *target.stride(),
        q, *q_strides,
        coins, coins.stride(0), coins.stride(1),
        final_coins.contiguous(), verify_lens if verify_lens is not None else candidates,
        params.temperature, params.top_k, params.top_p, params.min_p, invalid,
        accept, bonus, out,
        n, vocab,
        HAS_Q=has_q, HAS_VLENS=verify_lens is not None, PROBS=probabilities,
        BLOCK_V=_block_v(vocab, block_v), BLOCK_N=triton.next_power_of_2(n),
        num_warps=4,
    )
    return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out,
                             param_error=invalid)


# --------------------------------------------------------------------------------------------
# Public wrapper


def check_scores(name: str, scores: torch.Tensor, rows: torch.Tensor | None = None) -> None:
    """Every (verified) row of raw scores has a finite maximum: no NaN, no +inf, not all -inf.
    One reading pass; only a [b, n] temporary."""
    if scores.numel() == 0:
        return
    top = scores.amax(-1)
    if rows is not None:
        top = top[rows]
    if not bool(torch.isfinite(top).all()):
        raise KernelInputError(
            problem(
                "SR904",
                f"{name} has a verified row with NaN, +inf or only -inf scores",
                accepted="finite logits (-inf marks a masked token; every row keeps one finite)",
                fix=f"check the model output that produced {name}",
                field=name,
            )
        )


def verify_chain_with_params(
    candidates: torch.Tensor,
    target: torch.Tensor,
    draft: torch.Tensor | None = None,
    *,
    params: SamplingParams,
    probabilities: bool = False,
    coins: torch.Tensor | None = None,
    final_coins: torch.Tensor | None = None,
    verify_lens: torch.Tensor | None = None,
    offsets: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
) -> ChainVerifyResult:
    """Verify a batch whose requests carry their own sampling parameters (module docstring).

    `target` [b, n, V] and `draft` [b, n-1, V] (or None: target-only rule for sampled requests)
    are logits, or probabilities with `probabilities=True` (any float dtype). `params` holds one
    value per request. `coins` [b, >= n-1] / `final_coins` [b] override the coins, which
    otherwise come from `request_coins(params, n, offsets=offsets, generator=generator)`
    (columns 0..n-2 the steps, column n-1 the final draw). `verify_lens` [b] caps each request
    (positions past it may hold -1 and are never read). With value checks (default on CPU) a bad
    parameter is a coded error (SR910-SR915); without them (GPU) the request is flagged in
    `result.param_error` and accepts nothing.
    """
    require_params(params)
    b, n, vocab = _check_chain(
        candidates, target, "target", verify_lens=verify_lens, draft_probs=draft, coins=coins,
        final_coins=final_coins, offsets=offsets, probabilities=False, check_values=False,
    )
    device = candidates.device
    values = should_check_values(device, check_values)
    params.validate(b, vocab, device, values=values)
    if values and probabilities:
        _check_chain(
            candidates, target, "target", verify_lens=verify_lens, draft_probs=draft,
            coins=coins, final_coins=final_coins, probabilities=True, check_values=True,
        )
    elif values:
        _check_score_values(candidates, target, draft, verify_lens, coins, final_coins, vocab)
    if coins is None or final_coins is None:
        drawn = request_coins(params, n, offsets=offsets, generator=generator)
        coins = drawn[:, : n - 1] if coins is None else coins
        final_coins = drawn[:, n - 1] if final_coins is None else final_coins
    args = (candidates, target, draft, params, coins, final_coins)
    if _choose_backend(backend, candidates) == "triton":
        return verify_chain_with_params_triton(
            *args, verify_lens=verify_lens, probabilities=probabilities, block_v=block_v
        )
    return verify_chain_with_params_torch(
        *args, verify_lens=verify_lens, probabilities=probabilities
    )


def _check_score_values(
    candidates: torch.Tensor,
    target: torch.Tensor,
    draft: torch.Tensor | None,
    verify_lens: torch.Tensor | None,
    coins: torch.Tensor | None,
    final_coins: torch.Tensor | None,
    vocab: int,
) -> None:
    """Value checks for logit inputs: lengths, the verified token ids (-1 padding past a
    request's length is allowed), finite rows, coins in [0, 1)."""
    b, n = candidates.shape
    if verify_lens is not None:
        check_index_range("verify_lens", verify_lens, 1, n + 1)
    verified = _verified_positions(verify_lens, b, n, candidates.device)
    check_index_range("candidates", candidates[verified], 0, vocab)
    check_scores("target", target, verified)
    if draft is not None and n > 1:
        check_scores("draft", draft, verified[:, 1:])
    check_coin_values(coins, final_coins)
