"""ngram_match: vLLM's prompt-lookup proposals for a padded batch (input checks, then the compiled
CPU path or the torch path).

`chain_proposals(tokens [b, W], lengths [b], min_ngram=, max_ngram=, k=, backend=)` returns a
`ChainProposal`; `match_lengths(...)` the per-position suffix-match lengths the tree family
ranks. On CPU, chain proposals run `numba_impl` (one compiled pass over the rows; numba is the
optional `cpu` extra) when numba imports and the backend is `auto`; `torch` (the `backend=`
argument, or SPECREG_KERNEL_BACKEND=torch) runs the torch path, as does every other device and
a machine without numba. Both give the same proposals. There is no Triton path: the work is
max_ngram compares of [b, W] int64, which the torch path already does in a handful of launches.
"""

from __future__ import annotations

import torch

from specreg.backend import BACKEND_CHOICES, backend_for_device, requested_backend
from specreg.kernels.checks import (
    INDEX_DTYPES,
    check_dtype,
    check_index_range,
    check_same_device,
    check_shape,
    check_tensor,
    should_check_values,
)
from specreg_lookup.kernels.ngram_match import numba_impl, torch_impl
from specreg_lookup.kernels.ngram_match.types import ChainProposal

__all__ = ["ChainProposal", "chain_proposals", "check_history", "match_lengths"]


def check_history(
    tokens: torch.Tensor, lengths: torch.Tensor, *, check_values: bool | None = None
) -> tuple[torch.Tensor, torch.Tensor]:
    """SR900/SR901 unless `tokens` [b, W] and `lengths` [b] are integer tensors on one device
    with lengths in [1, W] (values checked on CPU, on GPU only with check_values=True)."""
    lengths = _checked_lengths(tokens, lengths, check_values)
    return tokens.long(), lengths


def _checked_lengths(
    tokens: torch.Tensor, lengths: torch.Tensor, check_values: bool | None
) -> torch.Tensor:
    """`check_history`'s checks; the lengths as int64, clamped to [1, W]."""
    check_tensor("history", tokens)
    check_dtype("history", tokens, INDEX_DTYPES)
    check_shape("history", tokens, (None, None))
    check_tensor("lengths", lengths)
    check_dtype("lengths", lengths, INDEX_DTYPES)
    check_shape("lengths", lengths, (tokens.shape[0],))
    check_same_device(history=tokens, lengths=lengths)
    if should_check_values(tokens.device, check_values) and tokens.shape[0]:
        low, high = (int(v) for v in torch.aminmax(lengths))  # one pass; the coded error
        if low < 1 or high > tokens.shape[1]:  # names the first bad value
            check_index_range("lengths", lengths, 1, tokens.shape[1] + 1)
    return lengths.long().clamp(1, max(tokens.shape[1], 1))


def match_lengths(tokens: torch.Tensor, lengths: torch.Tensor, max_ngram: int) -> torch.Tensor:
    tokens, lengths = check_history(tokens, lengths)
    return torch_impl.match_lengths(tokens, lengths, max_ngram)


def chain_proposals(
    tokens: torch.Tensor, lengths: torch.Tensor, *, min_ngram: int, max_ngram: int, k: int,
    check_values: bool | None = None, backend: str | None = None,
) -> ChainProposal:
    """vLLM's chain proposals; `backend` 'auto' | 'torch' | 'triton' (this family has no
    Triton path: torch runs), None reading SPECREG_KERNEL_BACKEND (SR116 for anything else)."""
    lengths = _checked_lengths(tokens, lengths, check_values)
    if _compiled(tokens, min_ngram, k, backend):
        return numba_impl.chain_proposals(tokens, lengths, min_ngram, max_ngram, k)
    return torch_impl.chain_proposals(tokens.long(), lengths, min_ngram, max_ngram, k)


def _compiled(tokens: torch.Tensor, min_ngram: int, k: int, backend: str | None) -> bool:
    """Whether the compiled CPU path runs: backend auto, CPU tensors, numba importable, and the
    candidate rule applies (min_ngram >= 1, W >= 2; k >= 0, as torch errs on k < 0)."""
    choice = requested_backend() if backend is None else backend
    if choice not in BACKEND_CHOICES:
        backend_for_device(tokens.device.type, choice)  # SR116, naming the choices
    return (choice == "auto" and tokens.device.type == "cpu" and min_ngram >= 1 and k >= 0
            and tokens.shape[1] >= 2 and numba_impl.kernel() is not None)
