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
    children; an all-zero row uses the target-only rule). Acceptance uniforms in [0, 1):
    `coins` [b, N], where `coins[:, P]` is the one coin of parent P's children under the
    target-only rule, and `child_coins` [b, N], where `child_coins[:, c]` is the coin child c is
    tested with under recursive rejection sampling (the wrapper fills both from the random
    stream, or from a caller's SGLang-layout coins). `keys` int64 [b] (each request's key) and
    `positions` int64 [b] (the absolute output position of the depth-1 children) key the final
    draw; `depth` = num_steps; thresholds in (0, 1] for the target-only rule.
    """

    candidates: torch.Tensor
    retrieve_index: torch.Tensor
    next_token: torch.Tensor
    next_sibling: torch.Tensor
    target_probs: torch.Tensor
    draft_probs: torch.Tensor | None
    coins: torch.Tensor
    child_coins: torch.Tensor
    keys: torch.Tensor
    positions: torch.Tensor
    depth: int = attrs.field(kw_only=True)
    threshold_single: float = attrs.field(default=1.0, kw_only=True)
    threshold_acc: float = attrs.field(default=1.0, kw_only=True)
