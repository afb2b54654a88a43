"""The value the ngram_match family returns: the chain proposals of a batch."""

from __future__ import annotations

import attrs
import torch


@attrs.frozen(kw_only=True)
class ChainProposal:
    """Chain proposals for b requests, k = the most drafts per request.

    `tokens` int64 [b, k]: the drafts, then the request's last token as filler (a valid id, so a
    fixed-width verify may run them; only the first `num_drafts` are proposals). `num_drafts`
    int64 [b]: how many were proposed (0: no match, vLLM proposes nothing). `start` int64 [b]:
    the history position the drafts are copied from (-1 where nothing matched). `ngram_len`
    int64 [b]: the matched n-gram's length (0 where nothing matched).
    """

    tokens: torch.Tensor
    num_drafts: torch.Tensor
    start: torch.Tensor
    ngram_len: torch.Tensor

    def as_lists(self) -> list[list[int]]:
        """One list per request of its proposed tokens (vLLM's propose() shape)."""
        counts = self.num_drafts.tolist()
        return [row[:n] for row, n in zip(self.tokens.tolist(), counts, strict=False)]
