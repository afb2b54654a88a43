"""The plain per-request rule of greedy tree verification (test oracle): walk each tree in Python.

From the root, the children of the last accepted node are tried in sibling order; the first
whose token equals the target's argmax at that node is accepted and the walk goes below it.
The walk stops when no child matches, after `depth` accepted drafts, or after N - 1 node
visits; the bonus is the argmax at the last accepted node. `path_result` writes a walk's
outcome the way every tree verifier reports it (also used by the sampling reference).
"""

from __future__ import annotations

import torch

from specreg.kernels.argmax.reference import row_argmax_reference
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult


def path_result(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    walks: list[tuple[list[int], int] | None],
    depth: int,
) -> TreeVerifyResult:
    """The outputs of each request's walk: its accepted local path (root first) and its bonus
    token, or None for a request that verifies nothing (it emits -1 everywhere)."""
    b, n = candidates.shape
    predicts = [-1] * (b * n)
    accept_index, output_tokens, counts, bonuses = [], [], [], []
    for r, walk in enumerate(walks):
        if walk is None:
            accept_index.append([-1] * (depth + 1))
            output_tokens.append([-1] * (depth + 1))
            counts.append(0)
            bonuses.append(-1)
            continue
        path, bonus = walk
        emitted = [int(candidates[r, node]) for node in path[1:]] + [bonus]
        rows = [int(retrieve_index[r, node]) for node in path]
        for row, token in zip(rows, emitted, strict=True):
            predicts[row] = token
        pad = [-1] * (depth + 1 - len(path))
        accept_index.append(rows + pad)
        output_tokens.append(emitted + pad)
        counts.append(len(path) - 1)
        bonuses.append(bonus)
    return TreeVerifyResult(
        predicts=torch.tensor(predicts, dtype=torch.int64),
        accept_index=torch.tensor(accept_index, dtype=torch.int64).view(b, depth + 1),
        accept_token_num=torch.tensor(counts, dtype=torch.int32),
        bonus=torch.tensor(bonuses, dtype=torch.int64),
        output_tokens=torch.tensor(output_tokens, dtype=torch.int64).view(b, depth + 1),
    )


def greedy_walk(
    tokens: list[int], first: list[int], sibling: list[int], predict: list[int], depth: int
) -> tuple[list[int], int]:
    """One request's (accepted local path, bonus) given each node's target argmax."""
    path, last, child = [0], 0, first[0]
    for _ in range(len(tokens) - 1):
        if child < 0 or len(path) - 1 >= depth:
            break
        if tokens[child] == predict[last]:
            path.append(child)
            last, child = child, first[child]
        else:
            child = sibling[child]
    return path, predict[last]


def verify_tree_greedy_reference(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    target_predict: torch.Tensor,
    *,
    depth: int,
) -> TreeVerifyResult:
    """Greedy verification on the target's argmax `target_predict` [b, N]."""
    walks = [
        greedy_walk(candidates[r].tolist(), next_token[r].tolist(), next_sibling[r].tolist(),
                    target_predict[r].tolist(), depth)
        for r in range(candidates.shape[0])
    ]
    return path_result(candidates, retrieve_index, walks, depth)


def verify_tree_greedy_from_logits_reference(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    target_logits: torch.Tensor,
    *,
    depth: int,
) -> TreeVerifyResult:
    """Greedy verification on `target_logits` [b, N, V] (argmax: `row_argmax_reference`)."""
    b, n, vocab = target_logits.shape
    predict = row_argmax_reference(target_logits.reshape(b * n, vocab)).view(b, n)
    return verify_tree_greedy_reference(
        candidates, retrieve_index, next_token, next_sibling, predict, depth=depth
    )
