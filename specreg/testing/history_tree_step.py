"""One draft-and-verify step for model-free drafters that propose trees from the token history
(SGLang's breadth-first NGRAM trees, suffix-tree speculation) in the reference loop.

`plan.drafter.propose_tree(history, lengths)` gives each request a tree of the verify width's
slots (`HistoryTreeDrafterProtocol`); the target scores every node along its own path, and
`plan.verifier` accepts the longest path that matches the target's argmax (`verify_tree_greedy`)
or draws one token per node (`verify_tree_sampling`, exact for drafts that depend on the history
alone). Nothing here imports a plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs
import torch

from specreg.testing.step_parts import lengths_keyword

if TYPE_CHECKING:
    from specreg.testing.step_parts import Batch, LoopView


def node_paths(tree: Any) -> tuple[torch.Tensor, torch.Tensor]:
    """(paths int64 [b, N, N]: each node's tokens from the root down to itself, padded with -1;
    depths int64 [b, N]) of a history tree, as `verify_logits` takes them."""
    tokens, depths = tree.tokens, tree.depth.long()
    b, n = tokens.shape
    ancestors = tree.ancestors()  # row t: t and the nodes above it
    paths = torch.full((b, n, n), -1, dtype=torch.long, device=tokens.device)
    rows, nodes, above = ancestors.nonzero(as_tuple=True)
    paths[rows, nodes, depths[rows, above]] = tokens[rows, above]
    return paths, depths


def first_slots(tree: Any, width: int) -> Any:
    """The tree's first `width` slots: in breadth-first order a parent's slot is below its
    children's, so they form a tree themselves (what a narrower candidate verifies)."""
    return attrs.evolve(tree, tokens=tree.tokens[:, :width], parents=tree.parents[:, :width],
                        valid=tree.valid[:, :width], depth=tree.depth[:, :width])


def history_tree_step(loop: LoopView, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Propose a tree per request, verify it: (tokens to commit [b, W], counts [b])."""
    drafter: Any = loop.plan.drafter
    verifier: Any = loop.plan.verifier
    if loop.params is not None:
        raise ValueError(
            f"plan for {loop.plan.algorithm.name!r} proposes trees; the reference loop verifies "
            "per-request sampling parameters for chains only (use proposals='chain')"
        )
    capped = lengths_keyword(loop)
    tree = drafter.propose_tree(batch.seqs, batch.lengths, **capped)
    if tree.tokens.shape[1] > loop.verify_width:
        tree = first_slots(tree, loop.verify_width)  # an adaptive candidate verifies fewer
    if tuple(tree.tokens.shape) != (batch.size, loop.verify_width):
        raise AssertionError(
            f"{loop.plan.algorithm.name}: propose_tree gave trees of shape "
            f"{list(tree.tokens.shape)}, the plan verifies [{batch.size}, {loop.verify_width}]"
        )
    paths, depths = node_paths(tree)
    logits = loop.verify_logits(batch, paths, depths)
    if loop.sampling:
        probs = torch.softmax(logits.float() / loop.temperature, dim=-1)
        out = verifier.verify_tree_sampling(tree, probs, keys=loop.keys,
                                            positions=batch.lengths, **capped)
    else:
        out = verifier.verify_tree_greedy(tree, logits, **capped)
    return out.output_tokens, out.num_accepted.long() + 1
