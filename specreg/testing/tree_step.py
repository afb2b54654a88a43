"""One draft-and-verify step for tree drafters (EAGLE-style), on the toy models.

The draft expands `topk` branches for `num_steps` levels with `select_top_k_tokens`-style
bookkeeping carried by the plan's verifier; the verifier builds the tree, the target scores every
node, and the verifier accepts the longest matching path (greedy) or samples along the tree.
Each branch's token path rides in the "hidden states" the draft step carries, so the toy draft
model can score it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import torch

if TYPE_CHECKING:
    from specreg.testing.loop import SpeculativeLoop, _Batch


def _draft_probs(loop: SpeculativeLoop, batch: _Batch, paths: torch.Tensor, depth: int) -> torch.Tensor:
    """Draft next-token probabilities after each branch: paths [b, branches, depth] -> [b, branches, V]."""
    b, branches, _ = paths.shape
    ext_len = batch.seqs.shape[1] + depth + 1
    ext = torch.zeros(b, branches, ext_len, dtype=torch.long)
    ext[:, :, : batch.seqs.shape[1]] = batch.seqs[:, None, :]
    cols = batch.lengths[:, None] + torch.arange(depth)[None, :]  # [b, depth]
    ext.scatter_(2, cols[:, None, :].expand(b, branches, depth), paths)
    lengths = (batch.lengths + depth)[:, None].expand(b, branches)
    logits = loop.draft.next_logits(ext.reshape(b * branches, ext_len), lengths.reshape(-1))
    return torch.softmax(logits.float() / loop.temperature, dim=-1).reshape(b, branches, -1)


def tree_step(loop: SpeculativeLoop, batch: _Batch) -> tuple[torch.Tensor, torch.Tensor]:
    """Draft a tree, verify it, and return (tokens to commit [b, W], counts [b])."""
    from specreg_eagle.tree import select_top_k_tokens

    plan = loop.plan
    verifier = plan.verifier
    config = plan.config
    k, steps, n = config.topk, config.num_steps, config.num_draft_tokens
    assert k is not None and steps is not None and n is not None  # a resolved config
    b = batch.size
    assert loop.draft_decode_width == k  # draft_decode width = one token per branch

    # the draft-extend output: K candidates after the root
    probs = _draft_probs(loop, batch, torch.zeros(b, 1, 0, dtype=torch.long), 0)[:, 0]
    topk_p, topk_index = torch.topk(probs, k, dim=-1)
    hidden = torch.zeros(b, steps, dtype=torch.long)  # each branch's path so far
    scores = None
    score_list, token_list, parents_list = [], [], []
    for i in range(steps):
        input_ids, hidden, scores, info = select_top_k_tokens(i, topk_p, topk_index, hidden, scores, k)
        score_list.append(info[0])
        token_list.append(info[1])
        parents_list.append(info[2])
        if i == steps - 1:
            break
        hidden = hidden.clone()
        hidden[:, i] = input_ids
        branch_paths = hidden[:, : i + 1].reshape(b, k, i + 1)
        probs = _draft_probs(loop, batch, branch_paths, i + 1)  # [b, K, V]
        topk_p, topk_index = torch.topk(probs.reshape(b * k, -1), k, dim=-1)

    tree = verifier.build_tree(
        batch.last_tokens(),
        batch.lengths - 1,
        score_list=score_list,
        token_list=token_list,
        parents_list=parents_list,
        mask_mode="qlen_only",
    )
    assert tree.num_verify_tokens == loop.verify_width, (tree.num_verify_tokens, loop.verify_width)
    tokens = tree.draft_tokens.view(b, n)
    depths = tree.positions.view(b, n) - (batch.lengths - 1)[:, None]
    ancestors = tree.tree_mask.view(b, n, n)  # row t: the nodes t attends (its path)
    paths = torch.full((b, n, n), -1, dtype=torch.long)
    where = ancestors.nonzero()
    rows, nodes, anc = where[:, 0], where[:, 1], where[:, 2]
    paths[rows, nodes, depths[rows, anc]] = tokens[rows, anc]
    logits = loop._verify_logits(batch, paths, depths)
    if loop.sampling:
        probs_t = torch.softmax(logits.float() / loop.temperature, dim=-1)
        out = verifier.verify_sampling(tree, probs_t, generator=loop.generator)
    else:
        out = verifier.verify_greedy(tree, logits)
    return out.output_tokens, out.num_emitted.long()
