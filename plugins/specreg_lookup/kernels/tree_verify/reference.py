"""The plain per-row rule of tree_verify: walk from the root, following the child whose token equals
the target's choice at the current node (the test oracle).

The target's choice at a node is its argmax (greedy) or a token drawn from its distribution
there (target-only sampling): a child is accepted when its token equals that choice, and the
choice at the deepest accepted node is the bonus. Drafts that are a function of the history
alone make the sampled walk exact: every emitted token is the target's own draw.
"""

from __future__ import annotations


def verify_row(tokens: list[int], parents: list[int], valid: list[bool],
               choice: list[int]) -> tuple[list[int], list[int]]:
    """(emitted tokens: accepted drafts then the bonus, accepted slots: the root first)."""
    node, path = 0, [0]
    while True:
        nxt = [c for c in range(len(tokens)) if valid[c] and parents[c] == node
               and tokens[c] == choice[node]]
        if not nxt:
            break
        node = nxt[0]
        path.append(node)
    return [tokens[c] for c in path[1:]] + [choice[node]], path
