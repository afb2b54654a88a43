"""`TreeSamplingInputs`: what every tree sampling implementation takes (one bundle)."""

from __future__ import annotations

import attrs
import torch


@attrs.frozen
class TreeSamplingInputs:
    """Tree sampling inputs of b requests, N nodes, V vocab (validated by the wrapper).

    `candidates` [b, N] node tokens; `retrieve_index` [b, N] flat rows; `next_token` /
    `next_sibling` [b, N] the first-child / next-sibling links (-1 = none); `target_probs`
    [b, N, V] (row i = p after node i); `draft_probs` None or [b, N, V] (row i = q of node i's
    children; an all-zero row uses the target-only rule); `coins` [b, N] and `final_coins` [b]
    float in [0, 1); `depth` = num_steps; thresholds in (0, 1] for the target-only rule.
    """

    candidates: torch.Tensor
    retrieve_index: torch.Tensor
    next_token: torch.Tensor
    next_sibling: torch.Tensor
    target_probs: torch.Tensor
    draft_probs: torch.Tensor | None
    coins: torch.Tensor
    final_coins: torch.Tensor
    depth: int = attrs.field(kw_only=True)
    threshold_single: float = attrs.field(default=1.0, kw_only=True)
    threshold_acc: float = attrs.field(default=1.0, kw_only=True)
