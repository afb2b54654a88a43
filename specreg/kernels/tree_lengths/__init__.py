"""`cut_below` / `cut_tree`: per-request draft lengths on draft trees, each request's tree cut
below its own depth.

A tree verified with `draft_lengths` (`specreg.step.draft_lengths`) is, for request r, the subtree
of nodes at depth <= draft_lengths[r]: the first-child link of every node at that depth is cut
(`retrieve_next_token` = -1), so every verify rule, kernel and backend walks the smaller tree
unchanged, and a length of 0 leaves the root alone (one plain sample from the root's row). The
tensors keep the plan's width; nothing is copied beyond one [b, N] link tensor.

Node depths come from the links alone (`torch_impl.node_depths`, pointer jumping without host
synchronisation, on the links' device); `reference` walks each tree in Python (the oracle).
"""

from __future__ import annotations

from typing import Any

import torch

from specreg.kernels.checks import check_draft_lengths
from specreg.kernels.tree_lengths.torch_impl import node_depths

__all__ = ["cut_below", "cut_tree", "node_depths"]


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
