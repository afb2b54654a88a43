"""Node depths of draft trees in torch, from the first-child / next-sibling links alone.

Pointer jumping over "reached from" edges (a first child is reached from its parent, one level
down; a sibling from its previous sibling, on the same level): ceil(log2 N) gathers on the
links' device, without host synchronisation.
"""

from __future__ import annotations

import torch


def node_depths(next_token: torch.Tensor, next_sibling: torch.Tensor) -> torch.Tensor:
    """int64 [b, N]: each node's depth below the root (0 for the root and unreachable slots)."""
    b, n = next_token.shape
    device = next_token.device
    nodes = torch.arange(n, device=device).expand(b, n)
    up = torch.arange(n + 1, device=device).repeat(b, 1)  # column n: where absent links land
    step = torch.zeros((b, n + 1), dtype=torch.int64, device=device)
    for link, weight in ((next_token, 1), (next_sibling, 0)):
        target = link.to(torch.int64)
        target = torch.where(target > 0, target, n)  # a link to 0 (the root) never exists
        up.scatter_(1, target, nodes.to(torch.int64).clone())
        step.scatter_(1, target, torch.full((b, n), weight, dtype=torch.int64, device=device))
    up, step = up[:, :n].contiguous(), step[:, :n].contiguous()
    step[:, 0] = 0
    up[:, 0] = 0
    for _ in range(max(1, (n - 1).bit_length())):
        step = step + torch.gather(step, 1, up)
        up = torch.gather(up, 1, up)
    return step
