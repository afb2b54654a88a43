"""match_tree: breadth-first draft trees over a request's best n-gram matches (input checks, then
the torch path).

`build_tree(tokens [b, W], lengths [b], min_ngram=, max_ngram=, breadth=, num_nodes=,
match_type=)` returns a `LookupTree` of num_nodes slots per request; the rule is
`reference.tree_row`. No Triton path: a tree is a few [b, breadth, breadth, depth] compares.
"""

from __future__ import annotations

import torch

from specreg_lookup.kernels.match_tree import torch_impl
from specreg_lookup.kernels.match_tree.types import LookupTree
from specreg_lookup.kernels.ngram_match import check_history, match_lengths

__all__ = ["LookupTree", "build_tree"]


def build_tree(
    tokens: torch.Tensor, lengths: torch.Tensor, *, min_ngram: int, max_ngram: int,
    breadth: int, num_nodes: int, match_type: str = "bfs", check_values: bool | None = None,
) -> LookupTree:
    tokens, lengths = check_history(tokens, lengths, check_values=check_values)
    ell = match_lengths(tokens, lengths, max_ngram)  # checked history: its checks pass as is
    return torch_impl.build_tree(
        tokens, lengths, ell, min_ngram=min_ngram, breadth=breadth, num_nodes=num_nodes,
        match_type=match_type,
    )
