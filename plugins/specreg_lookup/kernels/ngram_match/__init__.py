"""ngram_match: vLLM's prompt-lookup proposals for a padded batch (input checks, then the torch
path).

`chain_proposals(tokens [b, W], lengths [b], min_ngram=, max_ngram=, k=)` returns a
`ChainProposal`; `match_lengths(...)` the per-position suffix-match lengths the tree family
ranks. There is no Triton path: the work is max_ngram compares of [b, W] int64, which the torch
path already does in a handful of launches.
"""

from __future__ import annotations

import torch

from specreg.kernels.checks import (
    INDEX_DTYPES,
    check_dtype,
    check_index_range,
    check_same_device,
    check_shape,
    check_tensor,
    should_check_values,
)
from specreg_lookup.kernels.ngram_match import torch_impl
from specreg_lookup.kernels.ngram_match.types import ChainProposal

__all__ = ["ChainProposal", "chain_proposals", "check_history", "match_lengths"]


def check_history(
    tokens: torch.Tensor, lengths: torch.Tensor, *, check_values: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """SR900/SR901 unless `tokens` [b, W] and `lengths` [b] are integer tensors on one device
    with lengths in [1, W] (values checked on CPU, on GPU only with check_values=True)."""
    check_tensor("history", tokens)
    check_dtype("history", tokens, INDEX_DTYPES)
    check_shape("history", tokens, (None, None))
    check_tensor("lengths", lengths)
    check_dtype("lengths", lengths, INDEX_DTYPES)
    check_shape("lengths", lengths, (tokens.shape[0],))
    check_same_device(history=tokens, lengths=lengths)
    if should_check_values(tokens.device, check_values) and tokens.shape[0]:
        check_index_range("lengths", lengths, 1, tokens.shape[1] + 1)
    return tokens.long(), lengths.long().clamp(1, max(tokens.shape[1], 1))


def match_lengths(tokens: torch.Tensor, lengths: torch.Tensor, max_ngram: int) -> torch.Tensor:
    tokens, lengths = check_history(tokens, lengths)
    return torch_impl.match_lengths(tokens, lengths, max_ngram)


def chain_proposals(
    tokens: torch.Tensor, lengths: torch.Tensor, *, min_ngram: int, max_ngram: int, k: int,
    check_values: bool | None = None,
) -> ChainProposal:
    tokens, lengths = check_history(tokens, lengths, check_values=check_values)
    return torch_impl.chain_proposals(tokens, lengths, min_ngram, max_ngram, k)
