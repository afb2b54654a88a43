"""tree_verify: greedy and target-only sampling verification of `LookupTree`s (input checks, then
the torch path).

`verify_tree_greedy(tree, target_logits [b, N, V])` accepts the longest path that matches the
target's argmax; `verify_tree_sampling(tree, target_probs [b, N, V], generator=)` draws one
token per node (exponential race) and walks the same way, which is exact for drafts that
depend on the history only. Both return `specreg.protocols.VerifyResult`.
"""

from __future__ import annotations

import torch

from specreg.kernels.checks import check_same_device, check_shape, check_tensor
from specreg.protocols import VerifyResult
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
    tree: LookupTree, target_probs: torch.Tensor, *, generator: torch.Generator | None = None,
) -> VerifyResult:
    from specreg.kernels.sampling import exponential_race_sample

    _check(tree, target_probs, "target_probs")
    b, n, v = target_probs.shape
    choice = exponential_race_sample(target_probs.reshape(b * n, v), generator=generator)
    return torch_impl.verify_tree(tree, choice.reshape(b, n))
