"""Plain per-row reference of the filtering rule (the test oracle): sort, cut, renormalise."""

from __future__ import annotations

import math

import torch


def filtered_distribution(
    scores: torch.Tensor,
    *,
    temperature: float,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    probabilities: bool = False,
) -> torch.Tensor:
    """The filtered, temperature-scaled distribution of one row `scores` [V] as float64 [V].

    Follows the rule in `specreg.kernels.filtering` step by step with a full sort; temperature 0
    returns the one-hot of the argmax (lowest index on ties)."""
    s = scores.to(torch.float32)
    if probabilities:
        s = torch.log(s)
    vocab = s.shape[0]
    if temperature == 0:
        out = torch.zeros(vocab, dtype=torch.float64)
        out[int(torch.argmax(s))] = 1.0
        return out
    z = s / torch.tensor(temperature, dtype=torch.float32)
    keep = torch.ones(vocab, dtype=torch.bool)
    ordered = sorted(range(vocab), key=lambda v: -float(z[v]))
    if 0 < top_k < vocab:
        keep &= z >= z[ordered[top_k - 1]]
    shift = float(z.max())
    weight = [math.exp(float(z[v]) - shift) for v in range(vocab)]
    if top_p < 1:
        total = sum(weight[v] for v in range(vocab) if keep[v])
        above = 0.0
        cut = torch.zeros(vocab, dtype=torch.bool)
        for position, v in enumerate(ordered):
            if not keep[v]:
                continue
            tied_before = position > 0 and float(z[ordered[position - 1]]) == float(z[v])
            if not tied_before and above >= top_p * total:
                cut |= z <= z[v]
                break
            above += weight[v]
        keep &= ~cut
    if min_p > 0:
        keep &= torch.tensor([w >= min_p for w in weight])
    kept = torch.tensor([weight[v] if keep[v] else 0.0 for v in range(vocab)], dtype=torch.float64)
    return kept / kept.sum()
