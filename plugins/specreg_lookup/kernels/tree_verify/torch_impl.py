"""The torch path of tree_verify: accept every node whose parent is accepted and whose token is the
parent's choice, one vectorised pass per tree level, then read the path back."""

from __future__ import annotations

import torch

from specreg.contract.protocols import VerifyResult
from specreg_lookup.kernels.match_tree.types import LookupTree


def verify_tree(tree: LookupTree, choice: torch.Tensor) -> VerifyResult:
    """`choice` int64 [b, N]: the target's token at every node (argmax, or a draw)."""
    tokens, parents, valid, depth = tree.tokens, tree.parents, tree.valid, tree.depth
    b, n = tokens.shape
    device = tokens.device
    parent = parents.clamp(min=0)
    hit = valid & (tokens == choice.gather(1, parent))
    accepted = torch.zeros(b, n, dtype=torch.bool, device=device)
    accepted[:, 0] = True
    max_depth = n - 1
    for level in range(1, max_depth + 1):
        at_level = depth == level
        accepted |= at_level & hit & accepted.gather(1, parent)
    deepest_depth = torch.where(accepted, depth, -1).amax(dim=1)  # [b]
    node = torch.where(accepted & (depth == deepest_depth[:, None]),
                       torch.arange(n, device=device), n).amin(dim=1)
    num_accepted = deepest_depth
    slots = max_depth + 1
    path = torch.full((b, slots), -1, dtype=torch.long, device=device)
    cursor = node
    for level in range(max_depth, -1, -1):
        write = deepest_depth >= level
        path[:, level] = torch.where(write, cursor, path[:, level])
        cursor = torch.where(write & (level > 0), parent.gather(1, cursor[:, None])[:, 0], cursor)
    bonus = choice.gather(1, node[:, None])[:, 0]
    cols = torch.arange(slots, device=device)[None, :]
    path_tokens = tokens.gather(1, path[:, 1:].clamp(min=0))
    drafts = torch.cat([path_tokens, torch.zeros(b, 1, dtype=torch.long, device=device)], dim=1)
    out = torch.where(cols < num_accepted[:, None], drafts, -1)
    out = torch.where(cols == num_accepted[:, None], bonus[:, None], out)
    rows = torch.arange(b, device=device)[:, None] * n
    index = torch.where(path >= 0, rows + path, -1)
    return VerifyResult(
        num_accepted=num_accepted.to(torch.int32), output_tokens=out, bonus=bonus, width=n,
        accepted_index=index,
    )
