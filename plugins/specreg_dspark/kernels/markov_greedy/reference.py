"""The plain per-row rule of the greedy Markov step: the test oracle for `markov_greedy_step`."""

from __future__ import annotations

import torch


def markov_greedy_step_reference(
    base_logits: torch.Tensor, prev_tokens: torch.Tensor, w1: torch.Tensor, w2: torch.Tensor
) -> torch.Tensor:
    """Per request: the first index v with the largest ``base[v] + sum_r W2[v][r] * W1[prev][r]``
    (an all -inf row gives 0). Computed in float64, one element at a time; int64 [b]."""
    w1_rows, w2_rows = w1.double().tolist(), w2.double().tolist()
    out = []
    for base, prev in zip(base_logits.double().tolist(), prev_tokens.tolist(), strict=True):
        embed = w1_rows[prev]
        best, best_score = 0, None
        for v, logit in enumerate(base):
            score = logit + sum(w * e for w, e in zip(w2_rows[v], embed, strict=True))
            if best_score is None or score > best_score:
                best, best_score = v, score
        out.append(best)
    return torch.tensor(out, dtype=torch.int64)
