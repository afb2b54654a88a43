"""Torch implementation of the filtering rule: per-row statistics, token probabilities, rows.

Works on row chunks of `specreg.kernels.sampling.CPU_CHUNK_ELEMENTS` elements, so its
temporaries stay cache-sized whatever the batch. Every filtered probability is computed by the
same elementwise formula (`_filtered`), whether for one gathered token or a whole row, so the
acceptance test and the residual draw see the same numbers.
"""

from __future__ import annotations

import attrs
import torch

from specreg.kernels.sampling import cpu_row_chunks

#: Mass bins of the top-p search: TOP_P_BINS bins, each 1/TOP_P_BINS_PER_UNIT of a scaled logit
#: below the row's max (the last bin takes the rest).
TOP_P_BINS = 256
TOP_P_BINS_PER_UNIT = 8.0


@attrs.frozen(kw_only=True)
class RowStats:
    """Per-row summary of a filtered distribution (float32 [r] each): `shift` = max z,
    `threshold` = the smallest kept z (-inf when top-k and top-p keep everything),
    `norm` = the kept mass sum(exp(z - shift))."""

    shift: torch.Tensor
    threshold: torch.Tensor
    norm: torch.Tensor


def scaled_scores(
    rows: torch.Tensor, temperature: torch.Tensor, *, probabilities: bool
) -> torch.Tensor:
    """z = s / T as a fresh float32 [r, V] (s = log(rows) for probability inputs)."""
    if probabilities:
        return rows.to(torch.float32, copy=True).log_().div_(temperature[:, None])
    return torch.div(rows, temperature[:, None])


def _filtered(
    z: torch.Tensor, stats: RowStats, min_p: torch.Tensor, *, index: tuple = (..., None)
) -> torch.Tensor:
    """The filtered probability of scaled scores `z` ([r] or [r, V]; `index` broadcasts the
    per-row values). Overwrites `z` when it is a row block."""
    keep = None
    always = z.device.type != "cpu"  # on accelerators: no data-dependent branches (no sync)
    if always or _filters(stats.threshold, min_p):
        keep = z >= stats.threshold[index]
    weight = z.sub_(stats.shift[index]).exp_() if z.dim() > 1 else torch.exp(z - stats.shift)
    if always or bool((min_p > 0).any()):
        keep = weight >= min_p[index] if keep is None else keep & (weight >= min_p[index])
    if keep is not None:
        weight = weight.masked_fill_(~keep, 0.0) if z.dim() > 1 else torch.where(keep, weight, 0.0)
    return weight.div_(stats.norm[index]) if z.dim() > 1 else weight / stats.norm


def _filters(threshold: torch.Tensor, min_p: torch.Tensor) -> bool:
    """Whether any row cuts tokens (by a threshold or by min-p)."""
    return bool((threshold > float("-inf")).any()) or bool((min_p > 0).any())


def row_stats(
    z: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor, min_p: torch.Tensor
) -> RowStats:
    """`RowStats` of scaled scores `z` [r, V] (float32) under per-row top-k, top-p, min-p.
    Overwrites `z`."""
    rows, vocab = z.shape
    shift = z.amax(-1)
    threshold = torch.full((rows,), float("-inf"))
    cut_k = ((top_k > 0) & (top_k < vocab)).nonzero().flatten()
    if cut_k.numel():
        largest = torch.topk(z[cut_k], int(top_k[cut_k].max()), dim=-1).values
        threshold[cut_k] = largest.gather(1, (top_k[cut_k] - 1)[:, None]).squeeze(1)
    cut_p = (top_p < 1).nonzero().flatten()
    if cut_p.numel():
        threshold[cut_p] = _top_p_threshold(
            z[cut_p], shift[cut_p], threshold[cut_p], top_p[cut_p]
        )
    keep = z >= threshold[:, None] if bool((threshold > float("-inf")).any()) else None
    weight = z.sub_(shift[:, None]).exp_()
    if bool((min_p > 0).any()):
        keep = weight >= min_p[:, None] if keep is None else keep & (weight >= min_p[:, None])
    if keep is not None:
        weight.masked_fill_(~keep, 0.0)
    return RowStats(shift=shift, threshold=threshold, norm=weight.sum(-1))


def _top_p_threshold(
    z: torch.Tensor, shift: torch.Tensor, top_k_threshold: torch.Tensor, top_p: torch.Tensor
) -> torch.Tensor:
    """The top-p threshold per row: the z at which the descending cumulative mass of the top-k
    survivors first reaches p * their total.

    No full sort: the survivors' mass is binned by distance below the max (`TOP_P_BINS` bins of
    1/`TOP_P_BINS_PER_UNIT` logit, the last one open-ended), the bin where the cumulative mass
    reaches the goal is found, and only that bin's tokens are sorted."""
    rows, _ = z.shape
    survivors = z >= top_k_threshold[:, None]
    weight = torch.where(survivors, torch.exp(z - shift[:, None]), 0.0)
    goal = top_p * weight.sum(-1)
    bins = (shift[:, None] - z).mul_(TOP_P_BINS_PER_UNIT).clamp_(max=TOP_P_BINS - 1)
    bins = bins.to(torch.int64)
    flat = bins + torch.arange(rows)[:, None] * TOP_P_BINS
    mass = torch.bincount(flat.flatten(), weights=weight.flatten(), minlength=rows * TOP_P_BINS)
    cum = mass.view(rows, TOP_P_BINS).to(torch.float32).cumsum(-1)
    crossing = (cum < goal[:, None]).sum(-1).clamp_max(TOP_P_BINS - 1)
    before = torch.where(
        crossing > 0, cum.gather(1, (crossing - 1).clamp_min(0)[:, None]).squeeze(1), 0.0
    )
    in_bin = (bins == crossing[:, None]) & survivors
    width = max(int(in_bin.sum(-1).max()), 1)
    values = torch.topk(torch.where(in_bin, z, float("-inf")), width, dim=-1).values
    running = before[:, None] + torch.exp(values - shift[:, None]).cumsum(-1)
    first = (running < goal[:, None]).sum(-1).clamp_max(width - 1)
    return values.gather(1, first[:, None]).squeeze(1)


def gathered_row_stats(
    flat: torch.Tensor,
    index: torch.Tensor,
    temperature: torch.Tensor,
    top_k: torch.Tensor,
    top_p: torch.Tensor,
    min_p: torch.Tensor,
    *,
    probabilities: bool,
) -> RowStats:
    """`RowStats` of the rows `flat[index]` ([R, V] scores, per-row parameters [len(index)]),
    computed chunk by chunk (never more than a chunk of rows in float32 at once)."""
    count = index.shape[0]
    shift = torch.empty(count)
    threshold = torch.empty(count)
    norm = torch.empty(count)
    for start, stop in cpu_row_chunks(count, flat.shape[-1]):
        part = slice(start, stop)
        z = scaled_scores(
            flat.index_select(0, index[part]), temperature[part], probabilities=probabilities
        )
        stats = row_stats(z, top_k[part], top_p[part], min_p[part])
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
    """Filtered probabilities [r] of one gathered score per row (`scores` [r], any float)."""
    z = torch.log(scores.to(torch.float32)) if probabilities else scores
    return _filtered(z / temperature, stats, min_p, index=(...,))


def filtered_rows(
    rows: torch.Tensor,
    temperature: torch.Tensor,
    stats: RowStats,
    min_p: torch.Tensor,
    *,
    probabilities: bool,
) -> torch.Tensor:
    """The filtered distributions of `rows` [r, V] as float32 [r, V] (fresh)."""
    z = scaled_scores(rows, temperature, probabilities=probabilities)
    return _filtered(z, stats, min_p)
