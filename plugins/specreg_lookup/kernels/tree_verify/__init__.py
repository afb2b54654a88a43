"""tree_verify: greedy and target-only sampling verification of `LookupTree`s (input checks, then
the torch path).

`verify_tree_greedy(tree, target_logits [b, N, V])` accepts the longest path that matches the
target's argmax; `verify_tree_sampling(tree, target_probs [b, N, V], keys=, positions=)` takes
each node's token as plain keyed sampling's at the position of its children (the SAMPLE-role
race on the random stream at (the request's key, `positions` + the node's depth): the same token
for every node of one depth) and walks the same way. That is the drafter-invariant rule: the
emitted tokens equal plain keyed sampling, and it is exact for drafts that depend on the history
only. `keys` [b]: each request's key (missing: fresh keys from `generator`); `positions` [b]:
the absolute position of the root's children. Both return `specreg.contract.protocols.VerifyResult`.
"""

from __future__ import annotations

import torch

from specreg.kernels.checks import check_same_device, check_shape, check_tensor
from specreg.contract.protocols import VerifyResult
from specreg_lookup.kernels.match_tree.types import LookupTree
from specreg_lookup.kernels.tree_verify import torch_impl

__all__ = ["verify_tree_greedy", "verify_tree_sampling"]


def _check(tree: LookupTree, scores: torch.Tensor, name: str) -> None:
    check_tensor(name, scores)
    b, n = tree.tokens.shape
    check_shape(name, scores, (b, n, None))
    check_same_device(tokens=tree.tokens, **{name: scores})


def verify_tree_greedy(tree: LookupTree, target_logits: torch.Tensor) -> VerifyResult:
    _check(tree, target_logits, "target_logits")
    return torch_impl.verify_tree(tree, target_logits.argmax(dim=-1))


def verify_tree_sampling(
    tree: LookupTree, target_probs: torch.Tensor, *, keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None, generator: torch.Generator | None = None,
) -> VerifyResult:
    from specreg.kernels.chain.checks import check_position_values, check_stream_keys
    from specreg.kernels.checks import check_probabilities, should_check_values
    from specreg.kernels.random_stream import stream_keys
    from specreg.kernels.block_race import block_race_torch
    from specreg.kernels.random_stream import draw_lanes_torch
    from specreg.kernels.random_stream.types import SAMPLE_ROLE

    _check(tree, target_probs, "target_probs")
    b, n, v = target_probs.shape
    check_stream_keys(keys, positions, b)
    device = check_same_device(tokens=tree.tokens, target_probs=target_probs, keys=keys,
                               positions=positions)
    if should_check_values(device, None):
        check_probabilities("target_probs", target_probs, allow_zero_rows=True)
        check_position_values(positions)
    keys, positions = stream_keys(b, device, keys, positions, generator=generator)
    lanes = draw_lanes_torch(keys[:, None], SAMPLE_ROLE, positions[:, None] + tree.depth)
    rows = target_probs.reshape(b * n, v).to(torch.float32)
    choice = block_race_torch(rows, lanes.reshape(b * n, 2))
    return torch_impl.verify_tree(tree, choice.reshape(b, n))
