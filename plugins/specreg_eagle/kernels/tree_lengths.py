"""Per-request draft lengths on draft trees: each request's tree cut below its own depth.

A tree verified with `draft_lengths` (`specreg.draft_lengths`) is, for request r, the subtree
of nodes at depth <= draft_lengths[r]: the first-child link of every node at that depth is cut
(`retrieve_next_token` = -1), so every verify rule, kernel and backend walks the smaller tree
unchanged, and a length of 0 leaves the root alone (one plain sample from the root's row). The
tensors keep the plan's width; nothing is copied beyond one [b, N] link tensor.

Node depths come from the links alone by pointer jumping over "reached from" edges (a first
child is reached from its parent, one level down; a sibling from its previous sibling, on the
same level): ceil(log2 N) gathers, on the links' device, without host synchronisation.
"""

from __future__ import annotations

from typing import Any

import torch

from specreg.draft_lengths import check_draft_lengths


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


def cut_below(
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    draft_lengths: Any,
    *,
    depth: int,
    check_values: bool | None = None,
) -> torch.Tensor:
    """`next_token` with the first-child link of every node at depth >= draft_lengths[r] cut,
    after checking the lengths against the tree's `depth` (SR921, SR922); `next_token`
    itself when `draft_lengths` is None."""
    if draft_lengths is None:
        return next_token
    b = next_token.shape[0]
    lengths = check_draft_lengths(
        draft_lengths, b, depth, device=next_token.device, check_values=check_values,
        what=f"a tree of depth {depth} (num_steps)",
    )
    deep = node_depths(next_token, next_sibling) >= lengths[:, None]
    return torch.where(deep, torch.full_like(next_token, -1), next_token)


def cut_tree(tree: Any, draft_lengths: Any, *, depth: int, check_values: bool | None = None) -> Any:
    """A built tree (`TreeBuildResult`) with each request's nodes below draft_lengths[r] cut
    off (`cut_below`): what a tree drafter returns for per-request lengths; `tree` itself
    without them."""
    if draft_lengths is None:
        return tree
    import attrs

    cut = cut_below(
        tree.retrieve_next_token, tree.retrieve_next_sibling, draft_lengths, depth=depth,
        check_values=check_values,
    )
    return attrs.evolve(tree, retrieve_next_token=cut)
