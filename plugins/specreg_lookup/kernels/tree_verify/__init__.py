"""tree_verify: greedy and target-only sampling verification of `LookupTree`s on the core's greedy
tree walk (input checks, the target's choice per node, then `specreg.kernels.tree_verify_greedy`).

`verify_tree_greedy(tree, target_logits [b, N, V])` accepts the longest path that matches the
target's argmax; `verify_tree_sampling(tree, target_probs [b, N, V], keys=, positions=)` takes
each node's token as plain keyed sampling's at the position of its children (the SAMPLE-role
race on the random stream at (the request's key, `positions` + the node's depth): the same token
for every node of one depth) and walks the same way. That is the drafter-invariant rule: the
emitted tokens equal plain keyed sampling, and it is exact for drafts that depend on the history
only. `keys` [b]: each request's key (missing: fresh keys from `generator`); `positions` [b]:
the absolute position of the root's children. The walk itself is the core greedy tree kernel's,
fed the trees' first-child / next-sibling links (`torch_impl.tree_links`; siblings carry
distinct tokens, so at most one child matches). Both return
`specreg.contract.protocols.VerifyResult`.
"""

from __future__ import annotations

import torch

from specreg.contract.protocols import VerifyResult
from specreg.kernels.checks import check_same_device, check_shape, check_tensor
from specreg.kernels.tree_verify_greedy import verify_tree_greedy as core_verify_tree_greedy
from specreg_lookup.kernels.match_tree.types import LookupTree
from specreg_lookup.kernels.tree_verify import torch_impl

__all__ = ["verify_tree_greedy", "verify_tree_sampling"]


def _check(tree: LookupTree, scores: torch.Tensor, name: str) -> None:
    check_tensor(name, scores)
    b, n = tree.tokens.shape
    check_shape(name, scores, (b, n, None))
    check_same_device(tokens=tree.tokens, **{name: scores})


def _walk(tree: LookupTree, backend: str | None, **target: torch.Tensor) -> VerifyResult:
    """The core greedy walk over the trees' links on `target` (`target_logits` or
    `target_predict`), as a `VerifyResult` with one slot per tree slot."""
    n = tree.tokens.shape[1]
    retrieve_index, next_token, next_sibling = torch_impl.tree_links(tree)
    found = core_verify_tree_greedy(
        tree.tokens, retrieve_index, next_token, next_sibling, depth=max(n - 1, 1),
        backend=backend, **target,
    )
    return VerifyResult(
        num_accepted=found.accept_token_num, output_tokens=found.output_tokens[:, :n],
        bonus=found.bonus, width=n, accepted_index=found.accept_index[:, :n],
    )


def verify_tree_greedy(
    tree: LookupTree, target_logits: torch.Tensor, *, backend: str | None = None
) -> VerifyResult:
    _check(tree, target_logits, "target_logits")
    return _walk(tree, backend, target_logits=target_logits)


def verify_tree_sampling(
    tree: LookupTree, target_probs: torch.Tensor, *, keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None, generator: torch.Generator | None = None,
    backend: str | None = None,
) -> VerifyResult:
    from specreg.kernels.chain.checks import check_position_values, check_stream_keys
    from specreg.kernels.checks import check_probabilities, should_check_values
    from specreg.kernels.random_stream import stream_keys

    _check(tree, target_probs, "target_probs")
    b = target_probs.shape[0]
    check_stream_keys(keys, positions, b)
    device = check_same_device(tokens=tree.tokens, target_probs=target_probs, keys=keys,
                               positions=positions)
    if should_check_values(device, None):
        check_probabilities("target_probs", target_probs, allow_zero_rows=True)
        check_position_values(positions)
    keys, positions = stream_keys(b, device, keys, positions, generator=generator)
    choice = torch_impl.sampled_choice(tree, target_probs, keys, positions)
    return _walk(tree, backend, target_predict=choice)
