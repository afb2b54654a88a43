"""`TreeVerifyResult`: what greedy and sampling tree verification return (the one definition)."""

from __future__ import annotations

import attrs
import torch


@attrs.frozen(kw_only=True)
class TreeVerifyResult:
    """Outcome of verifying one tree per request (D = depth + 1 slots).

    - `predicts` int64 [b*N]: for each node on the accepted path, the token emitted after it
      (the next accepted draft, or the bonus at the last node); -1 elsewhere.
    - `accept_index` int64 [b, D]: retrieve_index of the accepted path (root first), -1 padded.
    - `accept_token_num` int32 [b]: accepted drafts, not counting the bonus.
    - `bonus` int64 [b]: the token emitted after the accepted drafts.
    - `output_tokens` int64 [b, D]: the accepted drafts, then the bonus, then -1.
    - `param_error` bool [b] (with sampling parameters only): requests whose parameters were
      invalid and unchecked (GPU); they accept nothing and emit -1.
    """

    predicts: torch.Tensor
    accept_index: torch.Tensor
    accept_token_num: torch.Tensor
    bonus: torch.Tensor
    output_tokens: torch.Tensor
    param_error: torch.Tensor | None = None

    @property
    def accept_len(self) -> torch.Tensor:
        """Accepted drafts per request (same as `accept_token_num`)."""
        return self.accept_token_num

    @property
    def num_emitted(self) -> torch.Tensor:
        return self.accept_token_num + 1
