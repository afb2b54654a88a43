"""One draft-and-verify step for head drafters (Medusa-style) in the reference loop.

An algorithm whose tree drafter reads heads on the target's hidden states, with no draft model
of its own (`HeadsDrafterProtocol`), reads one logits row per head.
The draft model gives them through `head_logits(seqs, lengths, num_heads) -> [b, heads, V]` when
it has heads (the transformers harness: heads on the target's last hidden state); for the toy
draft model, head d is the toy's prediction d + 1 tokens past the root along its own greedy
chain. `plan.drafter` turns them into its tree (start, step, tree) and `plan.verifier` verifies
it as in `tree_step`. Under the with-draft rule the drafter samples each request's head tokens
from its filtered q on the stream (the loop's keys; the depth-1 nodes at position `lengths`,
head d at `lengths + d`) and the verifier gets each node's q (`draft_probs`). Nothing here
imports a plugin.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

import torch

from specreg.testing.step_parts import lengths_keyword
from specreg.testing.tree_step import verify_tree

if TYPE_CHECKING:
    from specreg.contract.protocols import TreeDrafterProtocol, TreeVerifierProtocol
    from specreg.testing.step_parts import Batch, LoopView


def toy_head_logits(loop: LoopView, batch: Batch, num_heads: int) -> torch.Tensor:
    """The toy draft model as heads: row d = its logits d + 1 tokens past the root, along its
    greedy continuation. [b, num_heads, V]."""
    b = batch.size
    ext = torch.cat([batch.seqs, torch.zeros(b, num_heads, dtype=torch.long)], dim=1)
    rows = []
    for d in range(num_heads):
        logits = loop.draft.next_logits(ext, batch.lengths + d)
        ext[torch.arange(b), batch.lengths + d] = logits.argmax(-1)
        rows.append(logits.float())
    return torch.stack(rows, dim=1)


def heads_step(loop: LoopView, batch: Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Read the heads, build the drafter's tree, verify it: (tokens [b, W], counts [b])."""
    drafter = cast("TreeDrafterProtocol", loop.plan.drafter)
    verifier = cast("TreeVerifierProtocol", loop.plan.verifier)
    steps, n, b = loop.steps, loop.verify_width, batch.size
    reader = getattr(loop.draft, "head_logits", None)
    heads = reader(batch.seqs, batch.lengths, steps) if reader else toy_head_logits(loop, batch, steps)
    hidden = torch.zeros(b, 1)
    sampled = {"params": loop.params, "keys": loop.keys, "positions": batch.lengths,
               "generator": loop.generator} if loop.with_draft else {}
    draft = drafter.start(heads[:, 0], hidden, **sampled)
    for d in range(1, steps):
        draft = drafter.step(draft, heads[:, d], hidden)
    tree = drafter.tree(
        draft, batch.last_tokens(), batch.lengths - 1, mask_mode="qlen_only",
        **lengths_keyword(loop),
    )
    assert tree.num_verify_tokens == n, (tree.num_verify_tokens, n)
    q_source = (
        {"draft_probs": drafter.draft_probs(draft)}  # type: ignore[attr-defined]
        if loop.with_draft else {}
    )
    return verify_tree(loop, batch, tree, verifier, **q_source)
