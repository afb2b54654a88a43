"""Triton implementation of the filtering rule: jit functions the verifier kernels call per row.

`row_stats_tiles` streams one row in BLOCK_V tiles (int64 offsets): the max, then the top-k and
top-p thresholds by a pivot search over the float32 order of the filter keys (`scaled_tile`: the
scaled scores for logits, the probabilities for probability inputs; a monotone int32 key per
value; each pass counts the set at a pivot and jumps the bounds to the nearest element keys on
either side, so it ends on the exact element value, as a 32-step bisection would, in fewer
passes; ties behave as in the torch path), then the kept mass.
`filtered_tile` gives the filtered probabilities of one tile (or of one token: the acceptance
test reads it there) from those statistics; every weight is `exp_weight`, the one exp of the
Triton path (`tl.exp`, 0 at or below `EXP_FLOOR`), every log of a probability `tl.log`.
`row_stats_triton` runs the statistics over chosen rows of a [R, V] tensor (one program per
row); `filtered_rows_triton` writes filtered rows, `filtered_log_probs_triton` the logs of the
filtered probabilities at given tokens.
"""

from __future__ import annotations

import torch

from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, FILTER_RULES, FilterRule
from specreg.kernels.exp_log import EXP_FLOOR
from specreg.kernels.triton_shim import tl, triton

if triton is not None:
    #: int32 key of -inf: thresholds at or below it keep every token.
    _KEY_NEG_INF = tl.constexpr(-2139095041)
    _KEY_MIN = tl.constexpr(-2147483648)
    #: above every int32 key: "no element key on this side of the pivot"
    _KEY_LIMIT = tl.constexpr(2147483648)
    _EXP_FLOOR = tl.constexpr(EXP_FLOOR)

    @triton.jit
    def exp_weight(x):
        """The one exp of the Triton path: exp(x), 0 for x <= EXP_FLOOR (as torch's `exp_`)."""
        return tl.where(x > _EXP_FLOOR, tl.exp(x), 0.0)

    @triton.jit
    def scaled_tile(row_ptr, cols, inside, stride_v, temperature, PROBS: tl.constexpr):
        """(key, z) of one tile (-inf outside the row): z = s / T, s = log(p) for probability
        rows; the filter key is z for logits, p itself for probabilities (p^(1/T) orders as p,
        and no log merges two probabilities into a tie; -inf where p = 0, as its log)."""
        s = tl.load(row_ptr + cols * stride_v, mask=inside, other=float("-inf")).to(tl.float32)
        if PROBS:
            z = tl.log(tl.where(inside, s, 0.0)) / temperature
            key = tl.where(s > 0.0, s, float("-inf"))
        else:
            z = s / temperature
            key = z
        return key, z

    @triton.jit
    def _key(z):
        """Monotone int32 key of float32 values (-0.0 counts as +0.0)."""
        bits = (z + 0.0).to(tl.int32, bitcast=True)
        return tl.where(bits < 0, bits ^ 0x7FFFFFFF, bits)

    @triton.jit
    def _value(key):
        """The float32 of a key (`_key`'s inverse), -inf at or below the key of -inf."""
        bits = tl.where(key < 0, key ^ 0x7FFFFFFF, key).to(tl.int32)
        return tl.where(key <= _KEY_NEG_INF, float("-inf"), bits.to(tl.float32, bitcast=True))

    @triton.jit
    def _bisect(
        row_ptr, stride_v, vocab, temperature, shift, floor, min_p, goal, top_key,
        MASS: tl.constexpr, ABOVE: tl.constexpr, PROBS: tl.constexpr, BLOCK_V: tl.constexpr,
    ):
        """The largest key t with count (MASS=False) or mass (MASS=True) of {key >= max(t, floor),
        exp(z - shift) >= min_p} at least `goal` (ABOVE: more than `goal`); searched in
        [min int32, top_key] (t: the int32 order key `_key` of a filter key).

        A pivot search: each pass over the row counts the set at the pivot `mid` and also
        finds the nearest element keys on both sides of it; the count is the same anywhere
        between them, so the bounds jump to those elements (lo to the smallest key >= mid when
        the goal is met, hi to the largest key below it when not) instead of to mid. The
        answer, an element's key, is the bisection's exactly (ties included: a key is a value),
        in as many passes as halvings until the bounds meet on elements (at most 32)."""
        offs = tl.arange(0, BLOCK_V)
        lo = tl.full([], _KEY_MIN, tl.int64)
        hi = top_key.to(tl.int64)
        while lo < hi:
            mid = lo + (hi - lo + 1) // 2
            total = tl.zeros([BLOCK_V], tl.float32)
            above = tl.full([BLOCK_V], _KEY_LIMIT, tl.int64)
            below = tl.full([BLOCK_V], _KEY_MIN, tl.int64)
            for start in range(0, vocab, BLOCK_V):
                cols = (start + offs).to(tl.int64)
                inside = cols < vocab
                value, z = scaled_tile(row_ptr, cols, inside, stride_v, temperature, PROBS)
                key = _key(value).to(tl.int64)
                member = inside & (value >= floor)
                if MASS:
                    weight = exp_weight(z - shift)
                    member = member & (weight >= min_p)
                    total += tl.where(member & (key >= mid), weight, 0.0)
                else:
                    total += (member & (key >= mid)).to(tl.float32)
                above = tl.minimum(above, tl.where(member & (key >= mid), key, _KEY_LIMIT))
                below = tl.maximum(below, tl.where(member & (key < mid), key, _KEY_MIN))
            if ABOVE:
                ok = tl.sum(total, axis=0) > goal
            else:
                ok = tl.sum(total, axis=0) >= goal
            nearest_above = tl.min(above, axis=0)
            nearest_below = tl.max(below, axis=0)
            up = tl.where(nearest_above < _KEY_LIMIT, tl.maximum(nearest_above, mid), mid)
            down = tl.maximum(tl.minimum(nearest_below, mid - 1), lo)
            lo = tl.where(ok, tl.minimum(up, hi), lo)
            hi = tl.where(ok, hi, down)
        return lo

    @triton.jit
    def _kept_mass(row_ptr, stride_v, vocab, temperature, shift, threshold, min_p,
                   PROBS: tl.constexpr, BLOCK_V: tl.constexpr):
        offs = tl.arange(0, BLOCK_V)
        total = tl.zeros([BLOCK_V], tl.float32)
        for start in range(0, vocab, BLOCK_V):
            cols = (start + offs).to(tl.int64)
            inside = cols < vocab
            key, z = scaled_tile(row_ptr, cols, inside, stride_v, temperature, PROBS)
            weight = exp_weight(z - shift)
            total += tl.where(inside & (key >= threshold) & (weight >= min_p), weight, 0.0)
        return tl.sum(total, axis=0)

    @triton.jit
    def row_stats_tiles(row_ptr, stride_v, vocab, temperature, top_k, top_p, min_p,
                        PROBS: tl.constexpr, BLOCK_V: tl.constexpr, ORDER: tl.constexpr):
        """(shift, threshold, norm) of one row: see `specreg.kernels.filtering`; `ORDER` is the
        filter order's `FilterRule.code` (0 specreg, 1 vllm, 2 sglang)."""
        offs = tl.arange(0, BLOCK_V)
        best = tl.full([BLOCK_V], float("-inf"), tl.float32)
        for start in range(0, vocab, BLOCK_V):
            cols = (start + offs).to(tl.int64)
            key, z = scaled_tile(row_ptr, cols, cols < vocab, stride_v, temperature, PROBS)
            best = tl.maximum(best, key)
        top = tl.max(best, axis=0)
        top_key = _key(top)
        shift = top  # max z: the scaled score of the largest key (as the torch path)
        if PROBS:
            shift = tl.log(top) / temperature
        threshold = tl.full([], float("-inf"), tl.float32)
        if (top_k > 0) & (top_k < vocab):
            key = _bisect(row_ptr, stride_v, vocab, temperature, shift, threshold, 0.0,
                          top_k.to(tl.float32), top_key, False, False, PROBS, BLOCK_V)
            threshold = _value(key)
        if top_p < 1.0:
            # The set top-p measures (`FilterRule.top_p_over`): the top-k survivors (specreg),
            # those also past min-p (vllm), or every token (sglang).
            base_floor = threshold
            base_min_p = min_p * 0.0
            if ORDER == 1:
                base_min_p = min_p
            if ORDER == 2:
                base_floor = tl.full([], float("-inf"), tl.float32)
            survivors = _kept_mass(row_ptr, stride_v, vocab, temperature, shift, base_floor,
                                   base_min_p, PROBS, BLOCK_V)
            key = _bisect(row_ptr, stride_v, vocab, temperature, shift, base_floor, base_min_p,
                          top_p * survivors, top_key, True, ORDER == 2, PROBS, BLOCK_V)
            threshold = tl.maximum(threshold, _value(key))
        norm = _kept_mass(row_ptr, stride_v, vocab, temperature, shift, threshold, min_p,
                          PROBS, BLOCK_V)
        return shift, threshold, norm

    @triton.jit
    def filtered_tile(row_ptr, cols, inside, stride_v, temperature, shift, threshold, norm,
                      min_p, PROBS: tl.constexpr):
        """Filtered probabilities of one tile (0 outside the row), or of one token (`cols` a
        scalar): the same formula, so the acceptance test reads the numbers the race reads."""
        key, z = scaled_tile(row_ptr, cols, inside, stride_v, temperature, PROBS)
        weight = exp_weight(z - shift)
        keep = inside & (key >= threshold) & (weight >= min_p)
        return tl.where(keep, weight, 0.0) / norm

    @triton.jit
    def _row_stats_kernel(
        flat_ptr, stride_r, stride_v, index_ptr, temp_ptr, k_ptr, p_ptr, m_ptr,
        shift_ptr, threshold_ptr, norm_ptr, vocab,
        PROBS: tl.constexpr, BLOCK_V: tl.constexpr, ORDER: tl.constexpr,
    ):
        r = tl.program_id(0).to(tl.int64)
        row = tl.load(index_ptr + r).to(tl.int64)
        shift, threshold, norm = row_stats_tiles(
            flat_ptr + row * stride_r, stride_v, vocab, tl.load(temp_ptr + r),
            tl.load(k_ptr + r), tl.load(p_ptr + r), tl.load(m_ptr + r), PROBS, BLOCK_V, ORDER,
        )
        tl.store(shift_ptr + r, shift)
        tl.store(threshold_ptr + r, threshold)
        tl.store(norm_ptr + r, norm)

    @triton.jit
    def _filtered_rows_kernel(
        flat_ptr, stride_r, stride_v, index_ptr, temp_ptr, m_ptr, shift_ptr, threshold_ptr,
        norm_ptr, out_ptr, vocab, PROBS: tl.constexpr, BLOCK_V: tl.constexpr,
    ):
        r = tl.program_id(0).to(tl.int64)
        row_ptr = flat_ptr + tl.load(index_ptr + r).to(tl.int64) * stride_r
        temperature, min_p = tl.load(temp_ptr + r), tl.load(m_ptr + r)
        shift, threshold = tl.load(shift_ptr + r), tl.load(threshold_ptr + r)
        norm = tl.load(norm_ptr + r)
        offs = tl.arange(0, BLOCK_V)
        for start in range(0, vocab, BLOCK_V):
            cols = (start + offs).to(tl.int64)
            inside = cols < vocab
            values = filtered_tile(row_ptr, cols, inside, stride_v, temperature, shift,
                                   threshold, norm, min_p, PROBS)
            tl.store(out_ptr + r * vocab + cols, values, mask=inside)

    @triton.jit
    def _log_probs_at_kernel(
        flat_ptr, stride_r, stride_v, rows_ptr, tokens_ptr, temp_ptr, m_ptr, shift_ptr,
        threshold_ptr, norm_ptr, out_ptr, width, PROBS: tl.constexpr, BLOCK_W: tl.constexpr,
    ):
        m = tl.program_id(0).to(tl.int64)
        row_ptr = flat_ptr + tl.load(rows_ptr + m).to(tl.int64) * stride_r
        lanes = tl.arange(0, BLOCK_W)
        inside = lanes < width
        tokens = tl.load(tokens_ptr + m * width + lanes, mask=inside, other=0).to(tl.int64)
        values = filtered_tile(
            row_ptr, tokens, inside, stride_v, tl.load(temp_ptr + m), tl.load(shift_ptr + m),
            tl.load(threshold_ptr + m), tl.load(norm_ptr + m), tl.load(m_ptr + m), PROBS,
        )
        tl.store(out_ptr + m * width + lanes, tl.log(values), mask=inside)


def row_stats_triton(
    flat: torch.Tensor,
    index: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    *,
    probabilities: bool,
    block_v: int,
    rule: FilterRule = FILTER_RULES[DEFAULT_FILTER_ORDER],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(shift, threshold, norm) float32 [len(index)] of the rows `flat[index]` (`flat` [R, V]);
    per-row parameters [len(index)] (temperatures > 0); top-p measured as `rule` says."""
    count = index.shape[0]
    out = [torch.empty(count, dtype=torch.float32, device=flat.device) for _ in range(3)]
    if count:
        _row_stats_kernel[(count,)](
            flat, flat.stride(0), flat.stride(1), index, temperature, top_k, top_p, min_p,
            *out, flat.shape[1], PROBS=probabilities, BLOCK_V=block_v, ORDER=rule.code,
        )
    return out[0], out[1], out[2]


def filtered_rows_triton(
    flat: torch.Tensor,
    index: torch.Tensor,
    temperature: torch.Tensor,
    stats: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    min_p: torch.Tensor,
    *,
    probabilities: bool,
    block_v: int,
) -> torch.Tensor:
    """The filtered rows `flat[index]` as a fresh float32 [len(index), V], from their
    statistics `stats` (shift, threshold, norm; `row_stats_triton`): the numbers the Triton
    verifiers' acceptance test and race read (`filtered_tile`)."""
    count, vocab = index.shape[0], flat.shape[1]
    out = torch.empty((count, vocab), dtype=torch.float32, device=flat.device)
    if count:
        _filtered_rows_kernel[(count,)](
            flat, flat.stride(0), flat.stride(1), index, temperature, min_p, *stats, out, vocab,
            PROBS=probabilities, BLOCK_V=block_v,
        )
    return out


def filtered_log_probs_triton(
    flat: torch.Tensor,
    rows: torch.Tensor,
    tokens: torch.Tensor,
    temperature: torch.Tensor,
    stats: tuple[torch.Tensor, torch.Tensor, torch.Tensor],
    min_p: torch.Tensor,
    *,
    probabilities: bool,
) -> torch.Tensor:
    """log of the filtered probabilities float32 [M, w] of `tokens` int64 [M, w] (valid ids)
    in the rows `flat[rows]` under their statistics `stats` (shift, threshold, norm) [M]:
    `tl.log` of `filtered_tile`, -inf where the row holds 0."""
    count, width = tokens.shape
    out = torch.empty((count, width), dtype=torch.float32, device=flat.device)
    if count and width:
        _log_probs_at_kernel[(count,)](
            flat, flat.stride(0), flat.stride(1), rows, tokens.contiguous(), temperature, min_p,
            *stats, out, width, PROBS=probabilities, BLOCK_W=max(16, triton.next_power_of_2(width)),
        )
    return out
