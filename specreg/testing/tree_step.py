"""One draft-and-verify step for tree drafters (EAGLE-style), on the toy models.

The toy draft model scores every branch; `plan.drafter` keeps the top-k tokens per branch for
`num_steps` levels (those of the loop's candidate) and assembles the verify tree (under the
with-draft rule, sampled requests' children are drawn from their filtered q and the verifier
gets each node's draft logits); the target
scores every node, and `plan.verifier` accepts the longest matching path (greedy) or samples
along the tree. Each branch's token path rides in the "hidden states" the draft step carries, so
the toy draft model can score it. Nothing here imports a plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, cast

import torch

from specreg.testing.step_parts import Batch, LoopView, lengths_keyword

if TYPE_CHECKING:
    from specreg.contract.protocols import TreeDrafterProtocol, TreeVerifierProtocol


def _draft_logits(loop: LoopView, batch: Batch, paths: torch.Tensor, depth: int) -> torch.Tensor:
    """Draft next-token logits after each branch: paths [b, branches, depth] -> [b, branches, V]."""
    b, branches, _ = paths.shape
    ext_len = batch.seqs.shape[1] + depth + 1
    ext = torch.zeros(b, branches, ext_len, dtype=torch.long)
    ext[:, :, : batch.seqs.shape[1]] = batch.seqs[:, None, :]
    cols = batch.lengths[:, None] + torch.arange(depth)[None, :]  # [b, depth]
    ext.scatter_(2, cols[:, None, :].expand(b, branches, depth), paths)
    lengths = (batch.lengths + depth)[:, None].expand(b, branches)
    logits = loop.draft.next_logits(ext.reshape(b * branches, ext_len), lengths.reshape(-1))
    return logits.float().reshape(b, branches, -1)


def tree_step(loop: LoopView, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Draft a tree, verify it, and return (tokens to commit [b, W], counts [b])."""
    plan = loop.plan
    drafter = cast("TreeDrafterProtocol", plan.drafter)
    verifier = cast("TreeVerifierProtocol", plan.verifier)
    k, steps = drafter.topk, loop.steps
    b = batch.size
    assert loop.draft_decode_width == k  # draft_decode width = one token per branch

    # the draft-extend output: logits after the root; each branch's path rides in `hidden`
    logits = _draft_logits(loop, batch, torch.zeros(b, 1, 0, dtype=torch.long), 0)[:, 0]
    sampled = {"params": loop.params, "generator": loop.generator} if loop.with_draft else {}
    draft = drafter.start(logits, torch.zeros(b, steps, dtype=torch.long), **sampled)
    for i in range(1, steps):
        hidden = draft.hidden.clone()
        hidden[:, i - 1] = draft.input_ids
        branch_paths = hidden[:, :i].reshape(b, k, i)
        logits = _draft_logits(loop, batch, branch_paths, i).reshape(b * k, -1)  # [b*K, V]
        draft = drafter.step(draft, logits, hidden)
    tree = drafter.tree(
        draft, batch.last_tokens(), batch.lengths - 1, mask_mode="qlen_only",
        **lengths_keyword(loop),
    )
    assert tree.num_verify_tokens == loop.verify_width, (tree.num_verify_tokens, loop.verify_width)
    q_source = {"draft_logits": drafter.draft_logits(draft)} if loop.with_draft else {}  # type: ignore[attr-defined]
    return verify_tree(loop, batch, tree, verifier, **q_source)


def verify_tree(
    loop: LoopView, batch: Batch, tree: Any, verifier: TreeVerifierProtocol,
    draft_logits: torch.Tensor | None = None, draft_probs: torch.Tensor | None = None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Score every node of `tree` with the target (each along its own path) and verify it:
    (tokens to commit [b, W], counts [b]). Shared by every tree-drafting step. With
    `draft_logits` [b, W, V] (sampled children, the with-draft rule) the per-request-parameters
    verify gets each node's q source; with `draft_probs` [b, W, V] each node's q itself
    (filtered by the drafter, read as given)."""
    b, n = batch.size, loop.verify_width
    tokens = tree.draft_tokens.view(b, n)
    depths = tree.positions.view(b, n) - (batch.lengths - 1)[:, None]
    ancestors = tree.tree_mask.view(b, n, n)  # row t: the nodes t attends (its path)
    paths = torch.full((b, n, n), -1, dtype=torch.long)
    where = ancestors.nonzero()
    rows, nodes, anc = where[:, 0], where[:, 1], where[:, 2]
    paths[rows, nodes, depths[rows, anc]] = tokens[rows, anc]
    logits = loop.verify_logits(batch, paths, depths)
    capped = lengths_keyword(loop)
    if loop.params_verify is not None:
        q_source = {name: rows for name, rows in (("draft_logits", draft_logits),
                                                  ("draft_probs", draft_probs)) if rows is not None}
        out = loop.params_verify(tree, logits, params=loop.params, keys=loop.keys, **capped,
                                 **q_source, **loop.mask_inputs(paths, depths))
    elif loop.sampling:
        probs = torch.softmax(logits.float() / loop.temperature, dim=-1)
        out = verifier.verify_sampling(tree, probs, keys=loop.keys, **capped)
    else:
        out = verifier.verify_greedy(tree, logits, **capped)
    return out.output_tokens, out.num_accepted.long() + 1
