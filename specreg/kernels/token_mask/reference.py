"""Plain per-row reference of the grammar bitmask (the test oracle): bit v of word v // 32."""

from __future__ import annotations

import torch


def allowed_tokens(words: torch.Tensor, vocab: int) -> list[bool]:
    """Which of `vocab` tokens one bitmask row (int32 [ceil(V / 32)]) allows."""
    return [bool((int(words[v // 32]) >> (v % 32)) & 1) for v in range(vocab)]


def masked_row(scores: torch.Tensor, words: torch.Tensor, *, probabilities: bool) -> torch.Tensor:
    """A copy of one row with the disallowed tokens at -inf (logits) or 0 (probabilities)."""
    out = scores.clone()
    fill = 0.0 if probabilities else float("-inf")
    for v, ok in enumerate(allowed_tokens(words, scores.shape[0])):
        if not ok:
            out[v] = fill
    return out
