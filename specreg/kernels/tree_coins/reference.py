"""The plain per-request rule of the stream's tree coins (test oracle): walk each tree in Python.

Node c at depth d (the root 0) sits at absolute position `position + d - 1` and is tested with
the stream's acceptance uniform there (`accept_coin`, the ACCEPT role at its token); the
target-only coin of parent P is the uniform of P's first child.
"""

from __future__ import annotations

from specreg.kernels.random_stream.reference import accept_coin


def stream_coins_reference(
    tokens: list[int], first: list[int], sibling: list[int], key: int, position: int
) -> tuple[list[float], list[float]]:
    """One request's (coins, child_coins) from the stream: node c at depth d (the root 0) sits
    at absolute position `position + d - 1` and is tested with `accept_coin(key, that position,
    its token)`; the target-only coin of parent P is the coin of its first child. Values never
    read (a node not linked below the root, taken at depth 0; a leaf's parent coin, the
    root's coin) are filled as the torch wrapper fills them, so whole rows compare."""
    n = len(tokens)
    node = [accept_coin(key, position - 1, token) for token in tokens]
    stack = [(0, 0)]
    while stack:
        at, depth = stack.pop()
        node[at] = accept_coin(key, position + depth - 1, tokens[at])
        child = first[at]
        while child >= 0:
            stack.append((child, depth + 1))
            child = sibling[child]
    coins = [node[max(first[at], 0)] for at in range(n)]
    return coins, node
