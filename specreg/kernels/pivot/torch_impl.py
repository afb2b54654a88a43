"""Torch implementation of the pivot search: a row's sorted prefix down to a pivot, no sort.

FlashInfer's top-k / top-p renorm and vLLM's Triton top-k / top-p search pivots over the row's
values; on a CPU, with torch ops, the cheapest exact pivot is a column maximum: the row folded
onto `PIVOT_COLUMNS` columns is read once at reduction speed (`column_maxima`), and a
k-th largest column maximum (or the one where the ranked maxima's mass reaches the top-p goal)
bounds the cut from below, so only the columns reaching it are gathered and ranked
(`pivot_prefix`). `RowWeights` holds a row block's weights exp(z - max) (the one exp,
`specreg.kernels.exp_log.exp_`), built only when a rule needs them.
"""

from __future__ import annotations

from collections.abc import Callable

import torch

from specreg.kernels.exp_log import exp_

#: Columns of the fold (column j: elements j, j + C, ...; a remainder of V mod C elements are
#: columns of one element each).
PIVOT_COLUMNS = 1024
#: Column maxima ranked first for the top-p pivot (and at least top-k of them for top-k); a
#: nucleus needing more ranks four times as many, up to every column.
PIVOT_RANKED = 256
#: Mass bins of the binned top-p search: TOP_P_BINS bins, each 1/TOP_P_BINS_PER_UNIT of a scaled
#: logit below the row's max (the last bin takes the rest).
TOP_P_BINS = 256
TOP_P_BINS_PER_UNIT = 8.0


class RowWeights:
    """The weights `exp_(z - shift)` of a row block, built once when a rule needs them (per
    token, or their row sums)."""

    def __init__(self, z: torch.Tensor, shift: torch.Tensor) -> None:
        self._z, self._shift = z, shift
        self._full: torch.Tensor | None = None
        self._total: torch.Tensor | None = None

    def full(self) -> torch.Tensor:
        if self._full is None:
            self._full = exp_(torch.sub(self._z, self._shift[:, None]))
        return self._full

    def total(self) -> torch.Tensor:
        """The row sums of `full()`: the same weights the rows hold, so a row's mass is one
        exp's sum (not a fused softmax's own exp; as fast, 0.26 ms for 12 rows of 32k)."""
        if self._total is None:
            self._total = self.full().sum(-1)
        return self._total


def column_maxima(z: torch.Tensor) -> torch.Tensor:
    """The row's column maxima [r, C + V mod C] (`PIVOT_COLUMNS` folded columns, then the
    remainder's elements, each a column of its own): a read at reduction speed."""
    rows, vocab = z.shape
    body = vocab - vocab % PIVOT_COLUMNS
    folded = z[:, :body].view(rows, body // PIVOT_COLUMNS, PIVOT_COLUMNS).amax(1)
    return torch.cat([folded, z[:, body:]], 1) if body < vocab else folded


def pivot_prefix(
    z: torch.Tensor,
    maxima: torch.Tensor,
    shift: torch.Tensor,
    weight: RowWeights,
    need: torch.Tensor,
    top_k: torch.Tensor,
    cut_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    top_p_over: str,
    keeps_boundary: bool,
    *,
    z_of: Callable[[torch.Tensor, torch.Tensor], torch.Tensor] | None = None,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(prefix, L, complete) for the rows `need` (top-p measured over `top_p_over`, the
    boundary kept when `keeps_boundary`: a `FilterRule`'s fields): the rows of `z` (the filter
    keys: scaled scores, or probabilities with `z_of` mapping key values [m, w] of rows [m] to
    their scaled scores) sorted descending down to a pivot L (every element >= L of the row, in
    order; -inf after them): the prefix `row_stats` cuts, found without sorting the row. The
    maxima's masses are `exp_(z - shift)`, the one exp of the torch path.

    L is a column maximum: for a top-k row the k-th largest one (k columns hold an element
    >= it, so the k-th largest element is >= L); for a top-p row without top-k the first one at
    which the ranked maxima's mass reaches the goal (those maxima are elements, so the row's
    mass at or above L reaches it too). Only the columns whose maximum is >= L can hold such
    elements: they are gathered (C-th of the row each) and ranked. Ties at L in columns past
    the `PIVOT_RANKED` ranked ones can be missed; then the k-th value is still L, and a top-p
    prefix that falls short of the goal sends the row to the binned search, as a short
    topk prefix does, so the cut is the same as the sorted reference's; `complete` says
    that no such tie can be missing (so a threshold at L keeps only prefix elements)."""
    rows, vocab = z.shape
    body = vocab - vocab % PIVOT_COLUMNS
    depth = body // PIVOT_COLUMNS
    columns = maxima.shape[1]
    k = top_k[need]
    ranked_count = min(columns, max(PIVOT_RANKED, int(k.max())))
    sub = maxima if need.numel() == rows else maxima[need]
    k_rows = cut_k[need]
    p_rows = (~k_rows | (top_p_over == "all")) & (top_p[need] < 1)
    goal = None
    if bool(p_rows.any()):
        # the goal of the set top-p measures when it is not confined to the top-k survivors
        if top_p_over == "top_k_min_p" and bool((min_p[need] > 0).any()):
            w_rows = weight.full() if need.numel() == rows else weight.full()[need]
            total = torch.where(w_rows >= min_p[need, None], w_rows, 0.0).sum(-1)
        else:
            total = weight.total().index_select(0, need)
        goal = top_p[need] * total
    while True:
        ranked, order = torch.topk(sub, ranked_count, dim=-1)
        pivot = ranked.gather(1, (k - 1).clamp(0, ranked_count - 1)[:, None]).squeeze(1)
        if goal is None:
            break
        centre = shift[need, None]
        mass = exp_(ranked - centre if z_of is None else z_of(ranked, need).sub_(centre))
        if top_p_over == "top_k_min_p":
            mass = torch.where(mass >= min_p[need, None], mass, 0.0)
        running = mass.cumsum_(-1)
        below = running <= goal[:, None] if keeps_boundary else running < goal[:, None]
        at = below.sum(-1)
        short = p_rows & (at >= ranked_count)
        if ranked_count < columns and bool(short.any()):
            ranked_count = min(columns, 4 * ranked_count)  # a wider nucleus: rank more maxima
            continue
        p_pivot = ranked.gather(1, at.clamp_max(ranked_count - 1)[:, None]).squeeze(1)
        p_pivot = torch.where(k_rows, torch.minimum(pivot, p_pivot), p_pivot)
        pivot = torch.where(p_rows, p_pivot, pivot)
        break
    taken = max(1, int((ranked >= pivot[:, None]).sum(-1).max()))
    picked = order[:, :taken]
    sub_z = z if need.numel() == rows else z[need]
    parts = []
    if depth:
        grid = sub_z[:, :body].view(-1, depth, PIVOT_COLUMNS)
        index = picked.clamp(max=PIVOT_COLUMNS - 1)[:, None, :].expand(-1, depth, taken)
        block = torch.gather(grid, 2, index)
        block.masked_fill_((picked >= PIVOT_COLUMNS)[:, None, :], float("-inf"))
        parts.append(block.flatten(1))
    if body < vocab:
        rest = sub_z[:, body:]
        single = rest.gather(1, (picked - PIVOT_COLUMNS).clamp(0, vocab - body - 1))
        parts.append(single.masked_fill_(picked < PIVOT_COLUMNS, float("-inf")))
    candidates = torch.cat(parts, 1) if len(parts) > 1 else parts[0]
    candidates.masked_fill_(candidates < pivot[:, None], float("-inf"))
    count = max(1, int((candidates > float("-inf")).sum(-1).max()))
    values = torch.topk(candidates, min(count, candidates.shape[1]), dim=-1).values
    # no column past the ranked ones can hold an element at the pivot
    complete = (ranked[:, -1] < pivot) | (ranked_count == columns)
    return values, pivot, complete


def binned_top_p_threshold(
    key: torch.Tensor,
    z: torch.Tensor,
    weight: torch.Tensor,
    shift: torch.Tensor,
    base_floor: torch.Tensor,
    top_p: torch.Tensor,
    base_min_p: torch.Tensor | None,
    *,
    keeps_boundary: bool,
    weigh: Callable[[torch.Tensor, torch.Tensor], torch.Tensor],
) -> torch.Tensor:
    """The top-p threshold per row (a key): the key at which the descending cumulative mass of
    the set top-p measures (key >= `base_floor`, weight >= `base_min_p` when given) first
    reaches (`keeps_boundary`: passes) p * its total. `weight`: the rows' weights (`exp_`);
    `weigh(values, rows)` gives those of key values [m, w] of these rows (row numbers into
    `key`).

    No full sort: the set's mass is binned by distance of z below the max (`TOP_P_BINS` bins of
    1/`TOP_P_BINS_PER_UNIT` logit, the last one open-ended; z is monotone in the key, so the
    bins cut the key order into runs), the bin where the cumulative mass crosses the goal is
    found, and only that bin's keys are sorted."""
    rows, _ = z.shape
    survivors = key >= base_floor[:, None]
    if base_min_p is not None:
        survivors &= weight >= base_min_p[:, None]
    weight = torch.where(survivors, weight, 0.0)
    goal = top_p * weight.sum(-1)
    bins = (shift[:, None] - z).mul_(TOP_P_BINS_PER_UNIT).clamp_(max=TOP_P_BINS - 1)
    # A NaN distance (a row with NaN or +inf scores) converts to a negative integer: bin 0 keeps
    # the search defined, and the caller's check of the rows it reads refuses the row (SR904).
    bins = bins.to(torch.int64).clamp_(min=0)
    flat = bins + torch.arange(rows, device=z.device)[:, None] * TOP_P_BINS
    mass = torch.bincount(flat.flatten(), weights=weight.flatten(), minlength=rows * TOP_P_BINS)
    cum = mass.view(rows, TOP_P_BINS).to(torch.float32).cumsum(-1)
    below = (cum <= goal[:, None]) if keeps_boundary else (cum < goal[:, None])
    crossing = below.sum(-1).clamp_max(TOP_P_BINS - 1)
    before = torch.where(
        crossing > 0, cum.gather(1, (crossing - 1).clamp_min(0)[:, None]).squeeze(1), 0.0
    )
    in_bin = (bins == crossing[:, None]) & survivors
    width = max(int(in_bin.sum(-1).max()), 1)
    values = torch.topk(torch.where(in_bin, key, float("-inf")), width, dim=-1).values
    running = before[:, None] + weigh(values, torch.arange(rows, device=z.device)).cumsum(-1)
    below = (running <= goal[:, None]) if keeps_boundary else (running < goal[:, None])
    first = below.sum(-1).clamp_max(width - 1)
    return values.gather(1, first[:, None]).squeeze(1)
