"""The greedy Markov step in torch (the CPU path): two-step and vocab-chunked implementations.

`markov_greedy_step_torch` materialises the bias ``[b, V]`` and takes the argmax (what the
wrapper runs on CPU); `markov_greedy_step_chunked_torch` is the fused algorithm in torch (a running
max over vocab chunks, ``b * chunk`` floats of temporaries instead of ``b * V``).
"""

from __future__ import annotations

import torch


def markov_greedy_step_torch(
    base_logits: torch.Tensor, prev_tokens: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor
) -> torch.Tensor:
    """Two-step: bias = W1[prev] @ W2^T in float32, then argmax(base + bias)."""
    embed = w1[prev_tokens.long()].float()
    bias = embed @ w2.float().T
    return torch.argmax(base_logits.float() + bias, dim=-1)


def markov_greedy_step_chunked_torch(
    base_logits: torch.Tensor,
    prev_tokens: torch.Tensor,
    w1: torch.Tensor,
    w2: torch.Tensor,
    *,
    chunk: int = 16384,
) -> torch.Tensor:
    """The fused algorithm in torch: walk W2 in vocab chunks keeping a running max and argmax.

    Peak extra memory is ``b * chunk`` floats instead of ``b * V``. Ties keep the lowest index
    (a later chunk wins only with a strictly larger value).
    """
    embed = w1[prev_tokens.long()].float()
    b, vocab = base_logits.shape
    best = torch.full((b,), float("-inf"), device=base_logits.device)
    best_idx = torch.zeros(b, dtype=torch.int64, device=base_logits.device)
    for start in range(0, vocab, chunk):
        stop = min(start + chunk, vocab)
        scores = base_logits[:, start:stop].float() + embed @ w2[start:stop].float().T
        value, idx = scores.max(dim=-1)
        take = value > best
        best = torch.where(take, value, best)
        best_idx = torch.where(take, idx + start, best_idx)
    return best_idx
