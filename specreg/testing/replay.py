"""A replay target: a "model" whose greedy output is a fixed token stream, so acceptance measures
only how well a drafter predicts that text.

`ReplayTarget(streams)` holds one token stream per request (int64 [b, T]). Its logits at
position p of request r put the largest score on `streams[r, p + 1]` (and a small seeded noise
elsewhere), so greedy decoding from any prefix of the stream continues the stream, and a
verifier accepts a draft exactly when it is the stream's next token. Drafters that work from the
token history (ngram, suffix) can be measured on real text this way without a trained model.
"""

from __future__ import annotations

import torch


class ReplayTarget:
    """Greedy-replays `streams` [b, T]; positions beyond T - 2 repeat the last token."""

    def __init__(self, streams: torch.Tensor, vocab_size: int, *, seed: int = 0) -> None:
        if streams.dim() != 2 or streams.shape[1] < 2:
            raise ValueError(f"streams must be [b, T] with T >= 2, got {list(streams.shape)}")
        if int(streams.min()) < 0 or int(streams.max()) >= vocab_size:
            raise ValueError(f"stream tokens must lie in [0, {vocab_size})")
        self.streams = streams.long()
        self.vocab_size = vocab_size
        self._generator = torch.Generator().manual_seed(seed)

    def next_tokens(self, positions: torch.Tensor) -> torch.Tensor:
        """The stream token after each position: positions int64 [b, N] -> int64 [b, N]."""
        last = self.streams.shape[1] - 1
        return self.streams.gather(1, (positions + 1).clamp(0, last))

    def logits(self, positions: torch.Tensor) -> torch.Tensor:
        """float32 [b, N, V]: the next stream token scores 10, every other token below 1."""
        b, n = positions.shape
        noise = torch.rand(b, n, self.vocab_size, generator=self._generator)
        return noise.scatter_(2, self.next_tokens(positions)[..., None], 10.0)
