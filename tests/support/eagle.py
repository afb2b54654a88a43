"""Shared builders for the tree tests: random draft trees through EAGLE's real draft-loop
helpers, built into verify trees by the core's `build_tree`."""

from __future__ import annotations

import torch
from specreg_eagle.kernels.select_topk import organize_draft_results, select_top_k_tokens

from specreg.kernels.tree_build import build_tree


def random_draft(b: int, topk: int, steps: int, n: int, vocab: int, gen: torch.Generator):
    """Run the EAGLE draft loop on random probabilities; returns organised tree inputs."""
    hidden = torch.randn(b, 3, generator=gen)
    probs = torch.softmax(torch.randn(b, vocab, generator=gen) * 3, -1)
    topk_p, topk_index = probs.topk(topk, -1)
    scores = None
    score_list, token_list, parents_list = [], [], []
    for i in range(steps):
        _, hidden, scores, info = select_top_k_tokens(i, topk_p, topk_index, hidden, scores, topk)
        score_list.append(info[0])
        token_list.append(info[1])
        parents_list.append(info[2])
        probs = torch.softmax(torch.randn(b * topk, vocab, generator=gen) * 3, -1)
        topk_p, topk_index = probs.topk(topk, -1)
    return organize_draft_results(score_list, token_list, parents_list, n)


def naive_build_tree(bonus, parent_list, sel, drafts, seq_lens, topk, n):
    """Pure-Python reference: parents, qlen mask, positions and links per request."""
    out = []
    for r in range(len(bonus)):
        s = [int(v) for v in sel[r]]
        parents = [-1]
        for i in range(1, n):
            slot = s[i - 1] // topk
            parents.append(0 if slot == 0 else 1 + s.index(int(parent_list[r][slot])))
        mask = [[False] * n for _ in range(n)]
        depth = [0] * n
        for t in range(n):
            cur = t
            mask[t][0] = True
            while cur != 0:
                mask[t][cur] = True
                depth[t] += 1
                cur = parents[cur]
        children = {i: [j for j in range(n) if parents[j] == i] for i in range(n)}
        first = [children[i][0] if children[i] else -1 for i in range(n)]
        sibling = [-1] * n
        for kids in children.values():
            for a, c in zip(kids, kids[1:], strict=False):
                sibling[a] = c
        out.append(
            dict(
                mask=mask,
                positions=[int(seq_lens[r]) + d for d in depth],
                first=first,
                sibling=sibling,
                tokens=[int(bonus[r])] + [int(v) for v in drafts[r]],
            )
        )
    return out


def tree_links(b: int, parents) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(retrieve_index, first child, next sibling) [b, N] of the tree with `parents` (BFS
    order, -1 for the root) in every request; children in ascending index."""
    n = len(parents)
    first, sib = [-1] * n, [-1] * n
    for i in range(n):
        kids = [j for j in range(n) if parents[j] == i]
        if kids:
            first[i] = kids[0]
        for a, c in zip(kids, kids[1:], strict=False):
            sib[a] = c
    ridx = torch.arange(b * n).view(b, n)
    return ridx, torch.tensor(first).expand(b, n), torch.tensor(sib).expand(b, n)


def full_tree_links(b: int, topk: int):
    """A complete depth-2 tree (root, topk children, topk**2 grandchildren) in BFS order."""
    n = 1 + topk + topk * topk
    parents = [-1] + [0] * topk + [1 + i // topk for i in range(topk * topk)]
    return (n, parents, *tree_links(b, parents))


#: The fields every tree verify result holds.
RESULT_FIELDS = ("predicts", "accept_index", "accept_token_num", "bonus", "output_tokens")


def make_tree(b, topk, steps, n, vocab, seed, mode="qlen_only"):
    """A built verify tree over a random EAGLE draft, and the generator that drew it."""
    gen = torch.Generator().manual_seed(seed)
    parent_list, sel, drafts = random_draft(b, topk, steps, n, vocab, gen)
    bonus = torch.randint(0, vocab, (b,), generator=gen)
    seq = torch.randint(0, 5, (b,), generator=gen)
    return build_tree(bonus, parent_list, sel, drafts, seq, topk=topk, depth=steps,
                      num_verify_tokens=n, mask_mode=mode), gen


def links(tree, n):
    """The verify kernels' tree tensors of a built tree of n nodes."""
    return (tree.draft_tokens.view(-1, n), tree.retrieve_index, tree.retrieve_next_token,
            tree.retrieve_next_sibling)
