"""The torch path of match_tree: rank the matches, gather their continuations, merge equal prefixes
and order the nodes, all batched (no loop over tokens or requests)."""

from __future__ import annotations

import torch

from specreg_lookup.kernels.match_tree.types import LookupTree


def build_tree(
    tokens: torch.Tensor, lengths: torch.Tensor, ell: torch.Tensor, *, min_ngram: int,
    breadth: int, num_nodes: int, match_type: str = "bfs",
) -> LookupTree:
    """The trees of `reference.tree_row` for a padded batch; `ell` from ngram_match."""
    batch, width = tokens.shape
    device = tokens.device
    depth = num_nodes - 1
    m = max(1, min(breadth, width))
    starts = torch.arange(width, device=device)[None, :]
    score = torch.where(ell >= min_ngram, ell * (width + 1) + starts, -1)
    top, where = score.topk(m, dim=1)  # [b, M]: longest, then most recent
    kept = top >= 0
    cols = where[:, :, None] + torch.arange(depth, device=device)[None, None, :]  # [b, M, D]
    alive = kept[:, :, None] & (cols < lengths[:, None, None])
    cont = tokens.gather(1, cols.clamp(max=width - 1).reshape(batch, -1)).reshape(batch, m, depth)
    # same[b, i, j, d]: continuations i and j agree (and exist) on tokens 0..d
    agree = (cont[:, :, None, :] == cont[:, None, :, :]) & alive[:, :, None, :] & alive[:, None]
    same = agree.long().cumprod(dim=3).bool()
    rep = same.long().argmax(dim=2)  # [b, M, D]: first continuation sharing i's prefix up to d
    ranks = torch.arange(m, device=device)[None, :, None]
    is_node = alive & (rep == ranks)
    levels = torch.arange(depth, device=device)[None, None, :]
    order = levels * m + ranks  # breadth-first: depth, then rank
    if match_type == "prob":
        shared = same.sum(dim=1)  # [b, M, D]: continuations through node (j, d), indexed by j
        order = -shared * (depth * m + 1) + order
    big = torch.iinfo(torch.long).max
    order = torch.where(is_node, order, big).reshape(batch, -1)
    picked = order.argsort(dim=1, stable=True)[:, : num_nodes - 1]  # flat (rank, d) of each slot
    used = order.gather(1, picked) != big
    dump = m * depth  # unused picks write their slot here, past every real node
    slot_of = torch.full((batch, dump + 1), -1, dtype=torch.long, device=device)
    slots = torch.arange(1, num_nodes, device=device).expand(batch, -1)
    slot_of.scatter_(1, torch.where(used, picked, dump), slots)
    rank_of, level_of = picked // depth, picked % depth
    node_tokens = cont.reshape(batch, -1).gather(1, picked)
    parent_flat = rep.reshape(batch, -1).gather(
        1, (rank_of * depth + (level_of - 1).clamp(min=0))
    )  # the parent's representative rank, at level d - 1
    parent_slot = slot_of.gather(1, parent_flat * depth + (level_of - 1).clamp(min=0))
    parent_slot = torch.where(level_of == 0, 0, parent_slot)
    root = tokens.gather(1, (lengths - 1)[:, None])
    out_tokens = torch.cat([root, torch.where(used, node_tokens, root)], dim=1)
    out_parents = torch.cat(
        [torch.full((batch, 1), -1, dtype=torch.long, device=device),
         torch.where(used, parent_slot, 0)], dim=1)
    valid = torch.cat([torch.ones(batch, 1, dtype=torch.bool, device=device), used], dim=1)
    out_depth = torch.cat(
        [torch.zeros(batch, 1, dtype=torch.long, device=device),
         torch.where(used, level_of + 1, 0)], dim=1)
    return LookupTree(tokens=out_tokens, parents=out_parents, valid=valid, depth=out_depth)
