"""The logprobs family's values: what `emitted_logprobs` returns and the inputs its paths share."""

from __future__ import annotations

import attrs
import torch


@attrs.frozen(kw_only=True)
class EmittedLogprobs:
    """Log-probabilities of a verify step's emitted tokens (b requests, D slots).

    - `token` float32 [b, D]: the log-probability of each emitted token (`output_tokens`) under
      the distribution plain decoding samples it from at that position: the target's, after
      the request's temperature and filters (`raw=True`: the unprocessed target's log-softmax).
      -inf for a token the filters drop; NaN in slots that emitted nothing.
    - `top_tokens` int64 [b, D, n] and `top_logprobs` float32 [b, D, n]: the n most likely
      tokens at each emitted position and their log-probabilities, most likely first (n = the
      `top_n` asked for; -1 and NaN in slots that emitted nothing).
    - `raw`: whether the values are the unprocessed log-softmax.
    """

    token: torch.Tensor
    top_tokens: torch.Tensor
    top_logprobs: torch.Tensor
    raw: bool


@attrs.frozen(kw_only=True)
class LogprobInputs:
    """One row per emitted slot, M rows: `flat` [R, V] scores (logits, or probabilities with
    `probabilities`), `rows` int64 [M] (the row of `flat` each slot's token was drawn from),
    `tokens` int64 [M], per-slot `temperature` (> 0), `top_k`, `top_p`, `min_p` [M]."""

    flat: torch.Tensor
    rows: torch.Tensor
    tokens: torch.Tensor
    temperature: torch.Tensor
    top_k: torch.Tensor
    top_p: torch.Tensor
    min_p: torch.Tensor
    top_n: int
    probabilities: bool
    filter_order: str
