"""`tree_coins`: the acceptance coins of tree sampling, from the random stream or a caller's.

Every acceptance decision of tree sampling reads a uniform of the counter-based random stream
(`specreg.kernels.random_stream`) keyed by (request key, ACCEPT role, absolute position, draft
token): node c at depth d (the root 0) sits at absolute position `positions + d - 1`
(`positions`: the position of the depth-1 children, the token the root's row verifies). Under
recursive rejection child c is tested with its own uniform; under the target-only rule the
children of P share one coin, the uniform of P's first child. A caller's `coins` [b, N]
(SGLang's uniforms, for parity) replace them in SGLang's layout: P's target-only coin
`coins[:, P]`, child c's coin `coins[:, c - 1]`. Both layouts are what `TreeSamplingInputs`
takes (`coins`, `child_coins`).

`torch_impl` computes them on the links' device without host synchronisation (the Triton
kernels read them as given); `reference.stream_coins_reference` walks one request's tree in
Python (the oracle).
"""

from __future__ import annotations

import torch

from specreg.kernels.tree_coins.torch_impl import (
    caller_tree_coins,
    stream_node_coins,
    stream_tree_coins,
)

__all__ = ["caller_tree_coins", "stream_node_coins", "stream_tree_coins", "tree_coins"]


def tree_coins(
    candidates: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    keys: torch.Tensor,
    positions: torch.Tensor,
    coins: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(coins, child_coins) [b, N] of `TreeSamplingInputs`: a caller's SGLang-layout `coins`
    (`caller_tree_coins`), else the stream's acceptance uniforms (`stream_tree_coins`)."""
    if coins is not None:
        return caller_tree_coins(coins)
    return stream_tree_coins(candidates, next_token, next_sibling, keys, positions)
