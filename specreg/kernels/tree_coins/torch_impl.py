"""The acceptance coins of tree sampling in torch, without host synchronisation.

`stream_node_coins` computes every node's uniform of the counter-based stream at its absolute
position (node depths by pointer jumping, `specreg.kernels.tree_lengths`); `stream_tree_coins`
lays them out as `TreeSamplingInputs` takes them; `caller_tree_coins` lays out a caller's coins.
"""

from __future__ import annotations

import torch

from specreg.kernels.random_stream import key_words_torch, token_words_torch, uniforms_of
from specreg.kernels.random_stream.types import ACCEPT_ROLE, MASK32
from specreg.kernels.tree_lengths import node_depths


def stream_node_coins(
    candidates: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    keys: torch.Tensor,
    positions: torch.Tensor,
) -> torch.Tensor:
    """float32 [b, N]: the stream's acceptance uniform of every node c, one per (absolute
    position, draft token) in the ACCEPT role: (keys[r], ACCEPT, positions[r] + depth(c) - 1)
    at token candidates[r, c] (the chain family's `accept_coins_torch`, at tree positions)."""
    depth = node_depths(next_token, next_sibling)
    where = positions.to(torch.int64).unsqueeze(1) + depth - 1
    role = torch.full_like(where, ACCEPT_ROLE)
    lanes = key_words_torch(keys.to(torch.int64).unsqueeze(1), role, where)
    return uniforms_of(token_words_torch(lanes, candidates.to(torch.int64) & MASK32))


def stream_tree_coins(
    candidates: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    keys: torch.Tensor,
    positions: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(coins, child_coins) [b, N] from the stream: child c is tested with its own uniform
    (`stream_node_coins`) under recursive rejection, and the target-only rule's one coin of
    parent P is the uniform of P's first child. Every decision of one walk reads a different
    (position, token): the walk tries the children of one node per position, and under the
    target-only rule only their shared coin."""
    node = stream_node_coins(candidates, next_token, next_sibling, keys, positions)
    first = next_token.to(torch.int64).clamp_min(0)
    return node.gather(1, first), node


def caller_tree_coins(coins: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(coins, child_coins) [b, N] from a caller's coins [b, N] in SGLang's layout: the
    target-only coin of parent P is coins[:, P]; child c is tested with coins[:, c - 1] (the
    coin of chain step c in SGLang's chain kernel)."""
    shift = (torch.arange(coins.shape[1], device=coins.device) - 1).clamp_min(0)
    return coins, coins[:, shift]
