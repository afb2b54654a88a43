"""The penalties family's value: each request's repetition, frequency and presence penalties,
its logit bias, and the token history they count over."""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import attrs
import torch


def _padded(rows: Sequence[Sequence[int]] | None, batch: int, device, fill: int = -1) -> torch.Tensor:
    rows = rows or [[] for _ in range(batch)]
    width = max((len(r) for r in rows), default=0)
    out = torch.full((batch, width), fill, dtype=torch.int64, device=device)
    for i, row in enumerate(rows):
        if len(row):
            out[i, : len(row)] = torch.as_tensor(list(row), dtype=torch.int64, device=device)
    return out


@attrs.frozen(kw_only=True)
class Penalties:
    """Per-request penalties of one batch (b requests; vLLM's semantics):

    - `repetition` float32 [b] (1 = off, > 0): a token seen in the prompt or the output so far
      has its logit divided by it when positive, multiplied by it otherwise;
    - `frequency` float32 [b] and `presence` float32 [b] (0 = off, in [-2, 2]): subtract
      frequency x (times the token occurs in the output so far) and presence x (whether it
      does);
    - `prompt_tokens` int64 [b, P] and `output_tokens` int64 [b, L]: the history, -1 padded;
      "the output so far" at a verified position also holds the drafts before it;
    - `bias_ids` int64 [b, K] (-1 padded, distinct per request) and `bias_values` float32
      [b, K]: the logit bias, added first.
    """

    repetition: torch.Tensor
    frequency: torch.Tensor
    presence: torch.Tensor
    prompt_tokens: torch.Tensor
    output_tokens: torch.Tensor
    bias_ids: torch.Tensor
    bias_values: torch.Tensor

    @classmethod
    def of(
        cls,
        batch: int,
        *,
        repetition: float | Sequence[float] = 1.0,
        frequency: float | Sequence[float] = 0.0,
        presence: float | Sequence[float] = 0.0,
        prompt: Sequence[Sequence[int]] | None = None,
        output: Sequence[Sequence[int]] | None = None,
        logit_bias: Sequence[Mapping[int, float]] | None = None,
        device: torch.device | str = "cpu",
    ) -> Penalties:
        """Build from scalars or per-request lists; `logit_bias` is one {token: bias} per request."""

        def column(value) -> torch.Tensor:
            if isinstance(value, (int, float)):
                return torch.full((batch,), float(value), dtype=torch.float32, device=device)
            return torch.as_tensor(list(value), dtype=torch.float32, device=device)

        biases = list(logit_bias or [{} for _ in range(batch)])
        ids = _padded([list(b) for b in biases], batch, device)
        values = torch.zeros(ids.shape, dtype=torch.float32, device=device)
        for i, b in enumerate(biases):
            if b:
                values[i, : len(b)] = torch.as_tensor(list(b.values()), dtype=torch.float32,
                                                      device=device)
        return cls(repetition=column(repetition), frequency=column(frequency),
                   presence=column(presence), prompt_tokens=_padded(prompt, batch, device),
                   output_tokens=_padded(output, batch, device), bias_ids=ids, bias_values=values)
