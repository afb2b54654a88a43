"""Torch implementation of the filtering rule: per-row statistics, token probabilities, rows.

Works on row chunks (`specreg.kernels.row_chunks`), so its temporaries stay cache-sized whatever
the batch. Every processed value comes from one elementwise formula (`_filtered`: the one exp
`exp_`, the keep test on the filter key, one division by the kept mass), whether for one gathered token (`filtered_probs_at`, the acceptance
test), a few (`filtered_log_probs_at`, the logprobs: the log of those same values) or a whole row
(`filtered_rows`, the residual and the race), so they all read the same float32 numbers. The
filters rank the rows' keys (`filter_keys`): the scaled scores for logits, the probabilities
themselves for probability inputs (no log merging two of them into a tie).
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, FILTER_RULES, FilterRule
from specreg.kernels import pivot
from specreg.kernels.exp_log import exp_, log_, log_keys_
from specreg.kernels.filtering.types import RowStats
from specreg.kernels.pivot import RowWeights, column_maxima, pivot_prefix
from specreg.kernels.row_chunks import CPU_CHUNK_ELEMENTS, cpu_row_chunks

#: Elements per row chunk of `gathered_row_stats`: the statistics run some 40 small ops per
#: chunk whatever its size, so 12 rows of 32k, 1.5 MB (measured at b 64, V 32k, one thread:
#: 64 rows took 20.0 ms in chunks of 4 rows, 14.1 in 8, 10.8 in 16, and `softmax(rows / T)`
#: 10.7 ms; 16 rows pushed the params verify's peak extra memory past 0.1x of its inputs).
STATS_CHUNK_ELEMENTS = 3 * CPU_CHUNK_ELEMENTS // 2

#: Length of the sorted prefix that holds the top-k and (usually) the top-p nucleus, on rows
#: too short for the pivot search (`PIVOT_MIN_VOCAB`) or with top-k past `PIVOT_MAX_K`.
TOP_P_PREFIX = 256
#: Rows shorter than this take `torch.topk` of the prefix instead of the pivot search
#: (`specreg.kernels.pivot`; measured: on rows of a few thousand elements a topk
#: prefix costs about as much as the fold, and a full sort never wins on this CPU: 2.3 ms for
#: one 32k row against 0.08 ms for topk 256).
PIVOT_MIN_VOCAB = 4 * pivot.PIVOT_COLUMNS
#: Largest top-k the pivot search serves (past it, the topk prefix).
PIVOT_MAX_K = 256


def scaled_scores(
    rows: torch.Tensor, temperature: torch.Tensor, *, probabilities: bool, owned: bool = False
) -> torch.Tensor:
    """z = s / T as a fresh float32 [r, V] (s = log(rows) for probability inputs); `owned`:
    `rows` is the caller's own temporary (a gathered copy), divided in place when float32."""
    if probabilities:
        probs = rows.to(torch.float32)
        fresh = not owned and probs is rows
        return log_(probs, fresh=fresh).div_(temperature[:, None])
    if owned and rows.dtype == torch.float32:
        return rows.div_(temperature[:, None])
    return torch.div(rows, temperature[:, None])


def filter_keys(rows: torch.Tensor, *, probabilities: bool) -> torch.Tensor | None:
    """The values the filters rank, a new float32 [r, V]: the probabilities themselves for
    probability inputs (p^(1/T) orders as p does, and log would merge distinct probabilities
    into ties), -inf where p = 0 (a masked token, as its log); None for logits, whose keys are
    their scaled scores z."""
    if not probabilities:
        return None
    keys = rows.to(torch.float32, copy=True)
    return keys.masked_fill_(keys <= 0, float("-inf"))


def scaled_probabilities(
    rows: torch.Tensor, temperature: torch.Tensor, *, owned: bool = False
) -> tuple[torch.Tensor, torch.Tensor]:
    """(keys, z) of probability rows [r, V] or gathered values [r] / [r, m] (T [r]): the keys
    of `filter_keys` and z = log(p) / T (new), from one zero test (`log_keys_`); `owned`: a
    float32 `rows` is the caller's temporary, made the keys in place."""
    keys = rows.to(torch.float32, copy=not owned)
    return keys, log_keys_(keys).div_(temperature if rows.dim() == 1 else temperature[:, None])


def keys_to_z(temperature: torch.Tensor) -> Callable[[torch.Tensor, torch.Tensor], torch.Tensor]:
    """For probability keys: (values [m, w] of the rows `rows` [m]) -> their scaled scores
    log(values) / T, fresh, by the same log (`log_`) and division as `scaled_scores` (the -inf
    padding of a prefix reads as p = 0: z = -inf)."""

    def z_of(values: torch.Tensor, rows: torch.Tensor) -> torch.Tensor:
        return log_(values, fresh=True).div_(temperature.index_select(0, rows)[:, None])

    return z_of


def _filtered(
    z: torch.Tensor,
    keys: torch.Tensor | None,
    stats: RowStats,
    min_p: torch.Tensor,
    *,
    index: tuple = (..., None),
) -> torch.Tensor:
    """The filtered probabilities of scaled scores `z` ([r] or [r, V]; `keys` the matching
    probabilities for probability inputs, else None: the keys are z; `index` broadcasts the
    per-row values): pi = exp_(z - shift) / norm where key >= threshold and the weight >= min_p,
    else 0. Overwrites `z`. One formula for a token, a few tokens or a row: the same bits."""
    key = z if keys is None else keys
    always = z.device.type != "cpu"  # on accelerators: no data-dependent branches (no sync)
    cut = always or bool((stats.threshold > float("-inf")).any())
    drop = key < stats.threshold[index] if cut else None
    weight = exp_(z.sub_(stats.shift[index]))
    if drop is not None:
        weight.masked_fill_(drop, 0.0)
    if always or bool((min_p > 0).any()):
        weight.masked_fill_(weight < min_p[index], 0.0)
    return weight.div_(stats.norm[index])


def _drop_filtered(
    weight: torch.Tensor,
    key: torch.Tensor | None,
    threshold: torch.Tensor,
    min_p: torch.Tensor,
    *,
    cut: bool,
    always: bool = False,
) -> None:
    """Zero, in place, the weights [r, V] of dropped tokens: keys below the threshold (when
    `cut` and `key` is given) and weights below min-p (rows with min_p > 0, or always)."""
    if cut and key is not None:
        weight.masked_fill_(key < threshold[:, None], 0.0)
    if always or bool((min_p > 0).any()):
        weight.masked_fill_(weight < min_p[:, None], 0.0)


def row_stats(
    z: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    rule: FilterRule = FILTER_RULES[DEFAULT_FILTER_ORDER],
    *,
    keys: torch.Tensor | None = None,
    temperature: torch.Tensor | None = None,
) -> RowStats:
    """`RowStats` of scaled scores `z` [r, V] (float32) under per-row top-k, top-p, min-p,
    top-p measured as `rule` says (`specreg.contract.filter_order`). Probability inputs pass
    `keys` (their float32 probabilities, `filter_keys`) and `temperature` [r]: top-k and top-p
    then rank the probabilities (the threshold is one), z = log(p) / T giving the weights.

    Top-k and top-p thresholds come from one sorted prefix of each row's keys: on rows of at
    least `PIVOT_MIN_VOCAB`, the elements at or above a pivot found from the row's column
    maxima (`pivot.pivot_prefix`, no sort of the row); on shorter rows or past `PIVOT_MAX_K`,
    one `torch.topk` prefix (at least `TOP_P_PREFIX` long, and long enough for the largest k).
    A row whose nucleus does not fit in its prefix falls back to the binned search
    (`pivot.binned_top_p_threshold`). Tie rule, as the reference's: a threshold is an element's key and
    every element with that key is kept. Every weight is `exp_(z - shift)`; a prefix key's z is
    computed by `keys_to_z`, the same log and division that made the row's z."""
    rows, vocab = z.shape
    key = z if keys is None else keys
    z_of = None
    if keys is not None:
        assert temperature is not None, "probability keys need the rows' temperatures"
        z_of = keys_to_z(temperature)

    def weigh(values: torch.Tensor, at: torch.Tensor) -> torch.Tensor:
        """The weights of key values [m, w] of the rows `at` [m] (fresh)."""
        centre = shift.index_select(0, at)[:, None]
        return exp_(torch.sub(values, centre) if z_of is None else z_of(values, at).sub_(centre))

    folded = vocab >= PIVOT_MIN_VOCAB
    maxima = column_maxima(key) if folded else None
    top = (maxima if folded else key).amax(-1)  # the largest key; shift: its z (max z)
    shift = top if z_of is None else z_of(top[:, None], torch.arange(rows, device=z.device))[:, 0]
    weight = RowWeights(z, shift)
    threshold = torch.full((rows,), float("-inf"), device=z.device)
    cut_k = (top_k > 0) & (top_k < vocab)
    cut_p = top_p < 1
    need = (cut_k | cut_p).nonzero().flatten()
    if need.numel():
        largest_k = int(top_k[need].max())
        if folded and largest_k <= min(PIVOT_MAX_K, pivot.PIVOT_COLUMNS):
            values, low, complete = pivot_prefix(
                key, maxima, shift, weight, need, top_k, cut_k, top_p, min_p,
                rule.top_p_over, rule.keeps_top_p_boundary, z_of=z_of,
            )
            prefix, whole = values.shape[1], False
        else:
            prefix = min(vocab, max(TOP_P_PREFIX, largest_k))
            values = torch.topk(key if need.numel() == rows else key[need], prefix, dim=-1).values
            whole = prefix == vocab
            low = values[:, -1]
            complete = torch.full_like(low, whole, dtype=torch.bool)
        k_rows = cut_k[need]
        kth = values.gather(1, (top_k[need] - 1).clamp(0, prefix - 1)[:, None]).squeeze(1)
        floor = torch.where(k_rows, kth, float("-inf"))
        threshold[need] = floor
        # rows whose kept set is all in the prefix (every element >= the threshold is there)
        in_prefix = complete | (floor > low)
        w_prefix = weigh(values, need)
        p_local = cut_p[need].nonzero().flatten()
        if p_local.numel():
            every = p_local.numel() == rows  # the common uniform batch: no row copies
            p_rows = need[p_local]
            key_p = key if every else key[p_rows]
            floor_p = floor[p_local]
            # The set top-p measures: above `base_floor` and, for vLLM's order, past min-p.
            over_k = rule.top_p_over != "all"
            base_floor = floor_p if over_k else torch.full_like(floor_p, float("-inf"))
            base_min_p = min_p[p_rows] if rule.top_p_over == "top_k_min_p" else None
            if base_min_p is not None and not bool((base_min_p > 0).any()):
                base_min_p = None
            in_base = None
            if over_k and bool(k_rows[p_local].any()):
                in_base = key_p >= base_floor[:, None]
            if base_min_p is not None:
                weight_p = weight.full() if every else weight.full()[p_rows]
                past_min_p = weight_p >= base_min_p[:, None]
                in_base = past_min_p if in_base is None else in_base & past_min_p
            if in_base is None:
                goal = weight.total().index_select(0, p_rows)
            else:
                weight_p = weight.full() if every else weight.full()[p_rows]
                goal = torch.where(in_base, weight_p, 0.0).sum(-1)
            goal = top_p[p_rows] * goal
            ranked = values[p_local]
            running = w_prefix[p_local]
            dropped = ranked < base_floor[:, None]
            if base_min_p is not None:
                dropped |= running < base_min_p[:, None]
            running = running.masked_fill_(dropped, 0.0).cumsum(-1)
            if rule.keeps_top_p_boundary:
                reached = (running[:, -1] > goal) | whole
                first = (running <= goal[:, None]).sum(-1).clamp_max(prefix - 1)
            else:
                reached = (running[:, -1] >= goal) | whole
                first = (running < goal[:, None]).sum(-1).clamp_max(prefix - 1)
            cut = ranked.gather(1, first[:, None]).squeeze(1)
            missing = (~reached).nonzero().flatten()
            if missing.numel():
                rows_m = p_rows[missing]
                cut[missing] = pivot.binned_top_p_threshold(
                    key[rows_m], z[rows_m], weight.full()[rows_m], shift[rows_m],
                    base_floor[missing], top_p[rows_m],
                    None if base_min_p is None else base_min_p[missing],
                    keeps_boundary=rule.keeps_top_p_boundary,
                    weigh=lambda values, at: weigh(values, rows_m[at]),
                )
            threshold[p_rows] = torch.maximum(floor_p, cut)
            inside = complete[p_local] | (threshold[p_rows] > low[p_local])
            in_prefix[p_local] = inside & reached
        # the kept set lies inside the prefix: its mass from there, not from the whole row
        limit = threshold.index_select(0, need)[:, None]
        keep = (values >= limit) & (w_prefix >= min_p.index_select(0, need)[:, None])
        prefix_norm = torch.where(keep, w_prefix, 0.0).sum(-1)
        if need.numel() == rows and bool(in_prefix.all()):
            return RowStats(shift=shift, threshold=threshold, norm=prefix_norm)
    if not need.numel() and not bool((min_p > 0).any()):
        return RowStats(shift=shift, threshold=threshold, norm=weight.total())
    full = weight.full()
    _drop_filtered(full, key, threshold, min_p, cut=bool(need.numel()))
    norm = full.sum(-1)
    if need.numel():
        norm[need[in_prefix]] = prefix_norm[in_prefix]
    return RowStats(shift=shift, threshold=threshold, norm=norm)


def gathered_row_stats(
    flat: torch.Tensor,
    index: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    *,
    probabilities: bool,
    rule: FilterRule = FILTER_RULES[DEFAULT_FILTER_ORDER],
) -> RowStats:
    """`RowStats` of the rows `flat[index]` ([R, V] scores, per-row parameters [len(index)]),
    computed chunk by chunk (never more than a chunk of rows in float32 at once)."""
    count = index.shape[0]
    shift = torch.empty(count, device=flat.device)
    threshold = torch.empty(count, device=flat.device)
    norm = torch.empty(count, device=flat.device)
    for start, stop in cpu_row_chunks(count, flat.shape[-1], STATS_CHUNK_ELEMENTS):
        part = slice(start, stop)
        gathered = flat.index_select(0, index[part])
        # Probability rows keep their keys only when a rank filter reads them; otherwise z is
        # made in place and the shift is max z, the z of the largest key either way (log and
        # the division are monotone: torch 2.13's CPU log checked on every positive float32).
        cut = ((top_k[part] > 0) & (top_k[part] < flat.shape[-1])) | (top_p[part] < 1)
        keys = None
        if probabilities and bool(cut.any()):
            keys, z = scaled_probabilities(gathered, temperature[part], owned=True)
        else:
            z = scaled_scores(gathered, temperature[part], probabilities=probabilities,
                              owned=True)
        stats = row_stats(z, top_k[part], top_p[part], min_p[part], rule, keys=keys,
                          temperature=temperature[part])
        shift[part], threshold[part], norm[part] = stats.shift, stats.threshold, stats.norm
    return RowStats(shift=shift, threshold=threshold, norm=norm)


def filtered_probs_at(
    scores: torch.Tensor,
    temperature: torch.Tensor,
    stats: RowStats,
    min_p: torch.Tensor,
    *,
    probabilities: bool,
) -> torch.Tensor:
    """Filtered probabilities of gathered scores, one per row ([r]) or a few ([r, m]); the same
    float32 numbers `filtered_rows` holds at those tokens."""
    if probabilities:
        keys, z = scaled_probabilities(scores, temperature)
    else:  # the row path's division, per token
        keys = None
        z = torch.div(scores.to(torch.float32),
                      temperature if scores.dim() == 1 else temperature[:, None])
    return _filtered(z, keys, stats, min_p, index=(...,) if z.dim() == 1 else (..., None))


def filtered_log_probs_at(
    scores: torch.Tensor,
    temperature: torch.Tensor,
    stats: RowStats,
    min_p: torch.Tensor,
    *,
    probabilities: bool,
) -> torch.Tensor:
    """log of `filtered_probs_at` (-inf where the row holds 0): the logprobs of those tokens."""
    return log_(filtered_probs_at(scores, temperature, stats, min_p, probabilities=probabilities))


def filtered_rows(
    rows: torch.Tensor,
    temperature: torch.Tensor,
    stats: RowStats,
    min_p: torch.Tensor,
    *,
    probabilities: bool,
) -> torch.Tensor:
    """The filtered distributions of `rows` [r, V] as float32 [r, V] (fresh)."""
    if probabilities:
        keys, z = scaled_probabilities(rows, temperature)
        return _filtered(z, keys, stats, min_p)
    return _filtered(scaled_scores(rows, temperature, probabilities=False), None, stats, min_p)
