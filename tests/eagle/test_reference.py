"""EAGLE's own kernel family (`select_topk`) against its plain `reference.py`; the core tree
families' are in tests/kernels/test_tree_references.py."""


import pytest
import torch
from specreg_eagle.kernels.select_topk import organize_draft_results, select_top_k_tokens
from specreg_eagle.kernels.select_topk.reference import (
    organize_draft_results_reference,
    select_top_k_tokens_reference,
)



# --------------------------------------------------------------------------------- select_topk


@pytest.mark.parametrize("topk, steps, b", [(1, 3, 2), (2, 3, 3), (3, 4, 2), (4, 2, 1)])
def test_select_and_organize_match_reference(topk, steps, b):
    gen = torch.Generator().manual_seed(topk * 10 + steps)
    vocab = 40
    hidden = torch.randn(b, 3, generator=gen)
    probs = torch.softmax(torch.randn(b, vocab, generator=gen) * 3, -1)
    topk_p, topk_index = probs.topk(topk, -1)
    scores, lists = None, ([], [], [])
    for i in range(steps):
        got = select_top_k_tokens(i, topk_p, topk_index, hidden, scores, topk)
        ref = select_top_k_tokens_reference(i, topk_p, topk_index, hidden, scores, topk)
        for a, c in zip((*got[:3], *got[3]), (*ref[:3], *ref[3]), strict=True):
            assert a.shape == c.shape and torch.equal(a.to(c.dtype), c), i
        _, hidden, scores, info = got
        for out, part in zip(lists, info, strict=True):
            out.append(part)
        probs = torch.softmax(torch.randn(b * topk, vocab, generator=gen) * 3, -1)
        topk_p, topk_index = probs.topk(topk, -1)
    n = min(1 + topk + (steps - 1) * topk * topk, 1 + steps * topk)
    got = organize_draft_results(*lists, n)
    ref = organize_draft_results_reference(*lists, n)
    for a, c in zip(got, ref, strict=True):
        assert a.shape == c.shape and torch.equal(a.to(c.dtype), c)
