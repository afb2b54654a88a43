"""The plain per-request rule of tree depths (test oracle): walk each tree from its root."""

from __future__ import annotations

import torch


def node_depths_reference(next_token: torch.Tensor, next_sibling: torch.Tensor) -> torch.Tensor:
    """int64 [b, N]: each node's depth below the root, walking the first-child / next-sibling
    links in Python (0 for the root and for slots no walk reaches)."""
    b, n = next_token.shape
    out = [[0] * n for _ in range(b)]
    for r in range(b):
        first, sibling = next_token[r].tolist(), next_sibling[r].tolist()
        frontier, depth = [0], 0
        while frontier:
            depth += 1
            children = []
            for node in frontier:
                child = first[node]
                while child >= 0:
                    children.append(child)
                    child = sibling[child]
            for child in children:
                out[r][child] = depth
            frontier = children
    return torch.tensor(out, dtype=torch.int64).view(b, n)


def cut_below_reference(
    next_token: torch.Tensor, next_sibling: torch.Tensor, lengths: list[int]
) -> torch.Tensor:
    """`next_token` with the first child of every node at depth >= lengths[r] removed."""
    depths = node_depths_reference(next_token, next_sibling)
    out = next_token.clone()
    for r, length in enumerate(lengths):
        out[r][depths[r] >= length] = -1
    return out
