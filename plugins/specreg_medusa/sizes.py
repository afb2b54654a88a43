"""What a resolved medusa config implies: the static tree of head choices and its tree layout.

Torch-free (the hooks import it). Medusa head d (0-based) reads the target's last hidden state
and predicts the token d + 1 positions after the tree's root; a tree node at depth d + 1 is
one of head d's `topk` best tokens, so a node is a *path* of choice indices
`(c_1, ..., c_depth)`, each `c < topk`. The static tree keeps `num_draft_tokens - 1` paths:
first the top-1 chain through every head, so the tree reaches all `num_steps` heads, then the
paths of highest prior `prod_j DECAY / (c_j + 1)`, which falls along every extension, so the
kept set is prefix-closed (every node's parent is kept). Ties go to the shallower, then the
lexicographically smaller path.

The core tree kernels take a tree as draft *global ids* (`specreg.contract.tree_sizes`, the
numbering EAGLE's draft loop uses): level 0 holds ids 0..K-1 (one per choice), level j >= 1
holds K + K*K*(j-1) + a*K + c for choice c of the a-th expanded node of level j - 1.
`eagle_layout` numbers the static tree that way with K = max(topk, the most expanded nodes on
any level), so `build_tree` builds its mask, positions and links unchanged.

Sampled drafting (`specreg_medusa.drafter`) draws head d's `topk` tokens from its filtered q
without replacement, and choice c of head d is its c-th draw. The tree verifier's recursive rule
needs a node's children to be draws from q without replacement in sibling order, i.e. choices
0, 1, ..., c - 1 of its head in that order. `children_heads` gives, per verify node, the head
whose q its children were drawn from, or -1 where that does not hold (a leaf, or children that
are not such a prefix: the verifier then runs the target-only rule there, exact for any fixed
children). Every static tree meets it at every node: siblings differ only in their last choice,
whose prior DECAY / (c + 1) falls strictly with c, and the best-first walk pushes all of a
node's children at once, so it pops (*p, c) only after (*p, 0), ..., (*p, c - 1); a chain node's
(*p, 0) is kept from the start. The numbering gives siblings ascending ids in choice order
(a * K + c), and the verify tree orders siblings by id, so sibling order is choice order.
"""

from __future__ import annotations

import heapq
from collections.abc import Sequence

import attrs

#: The prior of choice c at any depth is DECAY / (c + 1): deep top-1 paths beat wide shallow ones.
DECAY = 0.7
Path = tuple[int, ...]


def tree_nodes(num_steps: int, topk: int, cap: int = 1 << 20) -> int:
    """Nodes of the full tree, root included: 1 + topk + topk**2 + ... + topk**num_steps
    (capped at `cap`, as only comparisons with small widths need it)."""
    total, level = 1, 1
    for _ in range(num_steps):
        level *= topk
        total += level
        if total >= cap:
            return cap
    return total


def infer_num_draft_tokens(num_steps: int, topk: int) -> int:
    """The verify width when num_draft_tokens is unset: a chain (topk 1) verifies num_steps + 1;
    a tree 1 + num_steps * topk nodes (topk per head on average), never more than it holds."""
    if topk == 1:
        return num_steps + 1
    return min(tree_nodes(num_steps, topk), 1 + num_steps * topk)


def _prior(path: Path) -> float:
    score = 1.0
    for c in path:
        score *= DECAY / (c + 1)
    return score


def static_tree(num_steps: int, topk: int, num_draft_tokens: int) -> tuple[Path, ...]:
    """The `num_draft_tokens - 1` kept paths, in level order (then by path).

    Needs num_steps + 1 <= num_draft_tokens <= tree_nodes(num_steps, topk) (validation
    reports SR482 otherwise)."""
    want = num_draft_tokens - 1
    chain = [(0,) * d for d in range(1, num_steps + 1)]
    kept = set(chain[:want])
    # Best-first over the tree: a child's prior is below its parent's, so popping in prior
    # order yields a prefix-closed set.
    heap: list[tuple[float, int, Path]] = [(-_prior((c,)), 1, (c,)) for c in range(topk)]
    heapq.heapify(heap)
    while heap and len(kept) < want:
        _, depth, path = heapq.heappop(heap)
        kept.add(path)
        if depth < num_steps:
            for c in range(topk):
                child = (*path, c)
                heapq.heappush(heap, (-_prior(child), depth + 1, child))
    return tuple(sorted(kept, key=lambda p: (len(p), p)))


@attrs.frozen(kw_only=True)
class TreeLayout:
    """A static tree in the core tree kernels' numbering (draft global ids), for one request.

    `encoding_topk` K of the ids; `parent_list` the K*(S-1)+1 parent ids build_tree reads
    ([] for S = 1); `ids` the kept nodes' global ids, ascending; `paths`, `heads` and `choices`
    each kept node's path, head (depth - 1) and choice index, in the same order;
    `children_heads` per verify node (the root, then the kept nodes in that order) the head
    its children were drawn from, or -1 (`children_heads`)."""

    num_steps: int
    topk: int
    num_draft_tokens: int
    encoding_topk: int
    parent_list: tuple[int, ...]
    ids: tuple[int, ...]
    paths: tuple[Path, ...]
    heads: tuple[int, ...]
    choices: tuple[int, ...]
    children_heads: tuple[int, ...]


def children_heads(paths: Sequence[Path]) -> tuple[int, ...]:
    """Per verify node (the root, then `paths` in verify order, which is sibling order): the
    head its children were drawn from (its depth), when they are choices 0, 1, ..., c - 1 of
    that head in sibling order; -1 for a leaf or any other set of children."""
    children: dict[Path, list[int]] = {}
    for path in paths:
        children.setdefault(path[:-1], []).append(path[-1])
    first_draws = {node: list(range(len(choices))) for node, choices in children.items()}
    return tuple(
        len(node) if node in children and children[node] == first_draws[node] else -1
        for node in ((), *paths)
    )


def eagle_layout(num_steps: int, topk: int, num_draft_tokens: int) -> TreeLayout:
    """The static tree of (num_steps, topk, num_draft_tokens) numbered for `build_tree`."""
    paths = static_tree(num_steps, topk, num_draft_tokens)
    kept = set(paths)
    expanded: list[list[Path]] = [
        [p for p in paths if len(p) == d and any((*p, c) in kept for c in range(topk))]
        for d in range(1, num_steps + 1)
    ]
    k = max([topk, *(len(level) for level in expanded[1:])])
    branch = {p: a for level in expanded[1:] for a, p in enumerate(level)}
    ids: dict[Path, int] = {}
    for p in paths:  # level order: a parent is numbered before its children
        if len(p) == 1:
            ids[p] = p[0]
        else:
            parent = p[:-1]
            a = parent[0] if len(parent) == 1 else branch[parent]
            ids[p] = k + k * k * (len(p) - 2) + a * k + p[-1]
    parent_list: list[int] = []
    if num_steps > 1:
        parent_list = [-1, *range(k)]
        for level in expanded[1:-1]:
            row = [ids[p] for p in level]
            parent_list += row + [0] * (k - len(row))  # unused slots: no node points at them
    order = sorted(paths, key=lambda p: ids[p])
    return TreeLayout(
        num_steps=num_steps, topk=topk, num_draft_tokens=num_draft_tokens, encoding_topk=k,
        parent_list=tuple(parent_list), ids=tuple(ids[p] for p in order), paths=tuple(order),
        heads=tuple(len(p) - 1 for p in order), choices=tuple(p[-1] for p in order),
        children_heads=children_heads(order),
    )


def widths_by_steps(configs: Sequence[object]) -> dict[int, int]:
    """Every served head count (the main config's and each candidate's) -> its verify width."""
    out: dict[int, int] = {}
    for config in configs:
        steps, width = config.num_steps, config.num_draft_tokens  # type: ignore[attr-defined]
        out[int(steps)] = max(out.get(int(steps), 0), int(width))
    return out
