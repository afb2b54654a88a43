"""Torch implementation of emitted-token log-probabilities: row statistics, then one formula.

The filtering family summarises each row by (shift, threshold, norm) (`RowStats`); a token's
filtered log-probability is the log of its filtered probability, computed by the family's one
formula (`filtered_log_probs_at`): the log of the float32 number the verifier's acceptance test
and race read for that token (-inf where it is dropped, or its weight is below the exp floor).
The rows are read chunk by chunk (`gathered_row_stats`), so no [M, V] copy is built; the top-n
alternatives are the `torch.topk` of the same chunks' filter keys.
"""

from __future__ import annotations

import torch

from specreg.contract.filter_order import filter_rule
from specreg.kernels.filtering import (
    RowStats,
    filter_keys,
    filtered_log_probs_at,
    gathered_row_stats,
    scaled_scores,
)
from specreg.kernels.logprobs.types import LogprobInputs
from specreg.kernels.row_chunks import FILTER_CHUNK_ELEMENTS, cpu_row_chunks


def logprobs_torch(
    inputs: LogprobInputs, stats: RowStats | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(token log pi [M], top tokens [M, n], top log pi [M, n]); `stats` when already known."""
    if stats is None:
        stats = gathered_row_stats(
            inputs.flat, inputs.rows, inputs.temperature, inputs.top_k, inputs.top_p,
            inputs.min_p, probabilities=inputs.probabilities, rule=filter_rule(inputs.filter_order),
        )
    token = filtered_log_probs_at(
        inputs.flat[inputs.rows, inputs.tokens], inputs.temperature, stats, inputs.min_p,
        probabilities=inputs.probabilities,
    )
    top_tokens = top_token_ids(inputs)
    top_logprobs = torch.full(top_tokens.shape, float("nan"), dtype=torch.float32,
                              device=top_tokens.device)
    if inputs.top_n:
        top_logprobs = filtered_log_probs_at(
            inputs.flat[inputs.rows[:, None], top_tokens], inputs.temperature, stats,
            inputs.min_p, probabilities=inputs.probabilities,
        )
    return token, top_tokens, top_logprobs


def top_token_ids(inputs: LogprobInputs) -> torch.Tensor:
    """The top_n tokens of each slot's row [M, n], most likely first: the largest filter keys
    (scaled scores, or the probabilities of probability rows; the kept set is an upper set of
    the keys, so these are the most likely tokens)."""
    count, n = inputs.rows.shape[0], inputs.top_n
    device = inputs.flat.device
    top_tokens = torch.full((count, n), -1, dtype=torch.int64, device=device)
    if not n:
        return top_tokens
    for start, stop in cpu_row_chunks(count, inputs.flat.shape[-1], FILTER_CHUNK_ELEMENTS):
        part = slice(start, stop)
        rows = inputs.flat.index_select(0, inputs.rows[part])
        keys = filter_keys(rows, probabilities=inputs.probabilities)
        if keys is None:
            keys = scaled_scores(rows, inputs.temperature[part], probabilities=False)
        top_tokens[part] = torch.topk(keys, n, dim=-1).indices
    return top_tokens
