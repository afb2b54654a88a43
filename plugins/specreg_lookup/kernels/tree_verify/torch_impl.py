"""The torch path of tree_verify: a `LookupTree`'s first-child / next-sibling links (what the
core tree kernels walk) and the target's sampled choice at every node."""

from __future__ import annotations

import torch

from specreg.kernels.block_race import block_race_torch
from specreg.kernels.random_stream import draw_lanes_torch
from specreg.kernels.random_stream.types import SAMPLE_ROLE
from specreg_lookup.kernels.match_tree.types import LookupTree


def tree_links(tree: LookupTree) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(retrieve_index, next_token, next_sibling) int64 [b, N] of the trees: each node's flat
    row r*N + i, its first child and its next sibling (children in ascending slot, -1 = none);
    slots that are not valid nodes are linked to nothing and from nothing."""
    b, n = tree.tokens.shape
    device = tree.tokens.device
    nodes = torch.arange(n, device=device)
    linked = tree.valid & (nodes > 0)
    parent = torch.where(linked, tree.parents.clamp(min=0), n)  # n: past the row, unlinked
    first = torch.full((b, n + 1), n, dtype=torch.int64, device=device)
    first.scatter_reduce_(1, parent, nodes.expand(b, n), "amin")
    next_token = torch.where(first[:, :n] < n, first[:, :n], -1)
    # later[r, c, s]: s is a linked sibling of linked c in a later slot
    later = (parent[:, :, None] == parent[:, None, :]) & linked[:, :, None] & linked[:, None, :]
    later &= nodes[:, None] < nodes[None, :]
    sibling = torch.where(later, nodes, n).amin(dim=2)
    next_sibling = torch.where(sibling < n, sibling, -1)
    retrieve_index = torch.arange(b * n, device=device).view(b, n)
    return retrieve_index, next_token, next_sibling


def sampled_choice(
    tree: LookupTree, target_probs: torch.Tensor, keys: torch.Tensor, positions: torch.Tensor
) -> torch.Tensor:
    """int64 [b, N]: the target's token at every node, the SAMPLE-role race of its row at
    (the request's key, `positions` + the node's depth)."""
    b, n, v = target_probs.shape
    lanes = draw_lanes_torch(keys[:, None], SAMPLE_ROLE, positions[:, None] + tree.depth)
    rows = target_probs.reshape(b * n, v).to(torch.float32)
    return block_race_torch(rows, lanes.reshape(b * n, 2)).reshape(b, n)
