"""Triton implementation of emitted-token log-probabilities: row statistics, then one formula.

Each slot's row statistics come from the filtering family's `row_stats_tiles`
(`row_stats_triton`: one program per slot, tiles of BLOCK_V, int64 offsets); the top-n
alternatives are the torch path's `torch.topk` of the filter keys (a selection: exact); then one
program per slot writes the log of the filtered probabilities of its token and its alternatives
(`filtered_log_probs_triton`: `tl.log` of `filtered_tile`, the numbers the Triton verifiers'
acceptance test and race read).
"""

from __future__ import annotations

import torch

from specreg.contract.filter_order import filter_rule
from specreg.kernels.filtering import filtered_log_probs_triton, row_stats_triton
from specreg.kernels.logprobs.torch_impl import top_token_ids
from specreg.kernels.logprobs.types import LogprobInputs
from specreg.kernels.triton_shim import vocab_tile


def logprobs_triton(
    inputs: LogprobInputs, *, block_v: int | None = None
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """As `logprobs_torch`, the statistics and every log pi from Triton kernels."""
    stats = row_stats_triton(
        inputs.flat, inputs.rows, inputs.temperature, inputs.top_k, inputs.top_p, inputs.min_p,
        probabilities=inputs.probabilities, block_v=vocab_tile(inputs.flat.shape[1], block_v),
        rule=filter_rule(inputs.filter_order),
    )
    top_tokens = top_token_ids(inputs)
    tokens = torch.cat([inputs.tokens[:, None], top_tokens.clamp_min(0)], 1)
    values = filtered_log_probs_triton(
        inputs.flat, inputs.rows, tokens, inputs.temperature, stats, inputs.min_p,
        probabilities=inputs.probabilities,
    )
    top_logprobs = values[:, 1:].masked_fill(top_tokens < 0, float("nan"))
    return values[:, 0].contiguous(), top_tokens, top_logprobs.contiguous()
