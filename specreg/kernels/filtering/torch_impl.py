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

#: First prefix length the top-p search sorts; it grows 8x until the nucleus fits.
TOP_P_PREFIX = 128


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
    z = rows.to(torch.float32, copy=True)
    if probabilities:
        z.log_()
    return z.div_(temperature[:, None])


def _filtered(
    z: torch.Tensor, stats: RowStats, min_p: torch.Tensor, *, index: tuple = (..., None)
) -> torch.Tensor:
    """The filtered probability of scaled scores `z` ([r] or [r, V]; `index` broadcasts the
    per-row values)."""
    weight = torch.exp(z - stats.shift[index])
    keep = (z >= stats.threshold[index]) & (weight >= min_p[index])
    return torch.where(keep, weight, 0.0) / stats.norm[index]


def row_stats(
    z: torch.Tensor, top_k: torch.Tensor, top_p: torch.Tensor, min_p: torch.Tensor
) -> RowStats:
    """`RowStats` of scaled scores `z` [r, V] (float32) under per-row top-k, top-p, min-p."""
    rows, vocab = z.shape
    shift = z.amax(-1)
    weight = torch.exp(z - shift[:, None])
    threshold = torch.full((rows,), float("-inf"))
    cut_k = ((top_k > 0) & (top_k < vocab)).nonzero().flatten()
    if cut_k.numel():
        largest = torch.topk(z[cut_k], int(top_k[cut_k].max()), dim=-1).values
        threshold[cut_k] = largest.gather(1, (top_k[cut_k] - 1)[:, None]).squeeze(1)
    cut_p = (top_p < 1).nonzero().flatten()
    if cut_p.numel():
        threshold[cut_p] = _top_p_threshold(
            z[cut_p], weight[cut_p], shift[cut_p], threshold[cut_p], top_p[cut_p]
        )
    keep = (z >= threshold[:, None]) & (weight >= min_p[:, None])
    norm = torch.where(keep, weight, 0.0).sum(-1)
    return RowStats(shift=shift, threshold=threshold, norm=norm)


def _top_p_threshold(
    z: torch.Tensor,
    weight: torch.Tensor,
    shift: torch.Tensor,
    top_k_threshold: torch.Tensor,
    top_p: torch.Tensor,
) -> torch.Tensor:
    """The top-p threshold per row: the z at which the descending cumulative mass of the top-k
    survivors first reaches p * their total. Sorts a prefix that grows until it holds the
    nucleus (a full sort only for flat rows)."""
    rows, vocab = z.shape
    survivors = z >= top_k_threshold[:, None]
    goal = top_p * torch.where(survivors, weight, 0.0).sum(-1)
    masked = torch.where(survivors, z, float("-inf"))
    result = torch.empty(rows)
    todo = torch.arange(rows)
    prefix = min(TOP_P_PREFIX, vocab)
    while todo.numel():
        values = torch.topk(masked[todo], prefix, dim=-1).values
        mass = torch.exp(values - shift[todo, None]).cumsum(-1)
        reached = mass[:, -1] >= goal[todo]
        done = reached if prefix < vocab else torch.ones_like(reached)
        first = (mass < goal[todo, None]).sum(-1).clamp_max(prefix - 1)
        picked = values.gather(1, first[:, None]).squeeze(1)
        result[todo[done]] = picked[done]
        todo = todo[~done]
        prefix = min(prefix * 8, vocab)
    return result


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
    z = scores.to(torch.float32)
    if probabilities:
        z = torch.log(z)
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
