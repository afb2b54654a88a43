"""Torch implementation of emitted-token log-probabilities: row statistics, then one formula.

The filtering family summarises each row by (shift, threshold, norm) (`RowStats`); a token's
filtered log-probability is then z - shift - log(norm) when it is kept, else -inf. The rows are
read chunk by chunk (`gathered_row_stats`), so no [M, V] copy is built; the top-n alternatives
come from `torch.topk` over the same chunks.
"""

from __future__ import annotations

import torch

from specreg.kernels.filtering.torch_impl import (
    FILTER_CHUNK_ELEMENTS,
    RowStats,
    gathered_row_stats,
    scaled_scores,
)
from specreg.kernels.filtering.types import filter_rule
from specreg.kernels.logprobs.types import LogprobInputs
from specreg.kernels.sampling.torch_impl import cpu_row_chunks


def kept_logprob(z: torch.Tensor, stats: RowStats, min_p: torch.Tensor, index: tuple) -> torch.Tensor:
    """log pi of scaled scores `z` ([M] or [M, n]) from the rows' statistics (-inf if dropped)."""
    shifted = z - stats.shift[index]
    keep = (z >= stats.threshold[index]) & (torch.exp(shifted) >= min_p[index])
    return torch.where(keep, shifted - torch.log(stats.norm[index]), float("-inf"))


def token_scores(inputs: LogprobInputs) -> torch.Tensor:
    """z = s / T of each slot's own token, float32 [M] (s = log p for probability rows)."""
    s = inputs.flat[inputs.rows, inputs.tokens].to(torch.float32)
    if inputs.probabilities:
        s = torch.log(s)
    return s / inputs.temperature


def logprobs_torch(
    inputs: LogprobInputs, stats: RowStats | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(token log pi [M], top tokens [M, n], top log pi [M, n]); `stats` when already known."""
    if stats is None:
        stats = gathered_row_stats(
            inputs.flat, inputs.rows, inputs.temperature, inputs.top_k, inputs.top_p,
            inputs.min_p, probabilities=inputs.probabilities, rule=filter_rule(inputs.filter_order),
        )
    token = kept_logprob(token_scores(inputs), stats, inputs.min_p, (...,))
    top_tokens, top_logprobs = top_alternatives(inputs, stats)
    return token, top_tokens, top_logprobs


def top_alternatives(inputs: LogprobInputs, stats: RowStats) -> tuple[torch.Tensor, torch.Tensor]:
    """The top_n tokens of each slot's row and their log pi ([M, n] each), most likely first."""
    count, n = inputs.rows.shape[0], inputs.top_n
    device = inputs.flat.device
    top_tokens = torch.full((count, n), -1, dtype=torch.int64, device=device)
    top_logprobs = torch.full((count, n), float("nan"), dtype=torch.float32, device=device)
    if not n:
        return top_tokens, top_logprobs
    for start, stop in cpu_row_chunks(count, inputs.flat.shape[-1], FILTER_CHUNK_ELEMENTS):
        part = slice(start, stop)
        z = scaled_scores(
            inputs.flat.index_select(0, inputs.rows[part]), inputs.temperature[part],
            probabilities=inputs.probabilities,
        )
        values, ids = torch.topk(z, n, dim=-1)
        chunk = RowStats(shift=stats.shift[part], threshold=stats.threshold[part],
                         norm=stats.norm[part])
        top_tokens[part] = ids
        top_logprobs[part] = kept_logprob(values, chunk, inputs.min_p[part], (..., None))
    return top_tokens, top_logprobs
