"""The CPU default of `verify_tree_greedy` from logits checks what the walk reads: the token
ids and tree links in full, and NaN only in the rows of the nodes on each request's accepted
path (the walk takes their argmax, which points at a row's first NaN). A NaN in such a row is
SR904 naming it; a NaN elsewhere is accepted by default, with the tokens of the valid input,
and refused with check_values=True (every row checked before any work)."""

from __future__ import annotations

import pytest
import torch
from specreg_eagle.kernels.select_topk import organize_draft_results, select_top_k_tokens
from specreg.kernels.tree_build.torch_impl import build_tree_torch
from specreg.kernels.tree_build.types import TreeBuildInputs
from specreg.kernels.tree_verify_greedy import verify_tree_greedy

from specreg.errors import KernelInputError


def _draft(b, topk, steps, n, vocab, gen):
    """Random drafts through EAGLE's draft helpers (as `benchmarks/bench_eagle_cpu.py`)."""
    hidden = torch.randn(b, 8, generator=gen)
    tp, ti = torch.softmax(torch.randn(b, vocab, generator=gen), -1).topk(topk, -1)
    scores, lists = None, ([], [], [])
    for i in range(steps):
        _, hidden, scores, info = select_top_k_tokens(i, tp, ti, hidden, scores, topk)
        for lst, item in zip(lists, info, strict=True):
            lst.append(item)
        tp, ti = torch.softmax(torch.randn(b * topk, vocab, generator=gen), -1).topk(topk, -1)
    return organize_draft_results(*lists, n)


def _inputs(seed: int):
    b, k, s, n, v = 4, 2, 3, 6, 300
    gen = torch.Generator().manual_seed(seed)
    parent_list, sel, drafts = _draft(b, k, s, n, v, gen)
    bonus = torch.randint(0, v, (b,), generator=gen)
    seq = torch.randint(10, 100, (b,), generator=gen)
    tree = build_tree_torch(TreeBuildInputs(bonus, parent_list, sel, drafts, seq, topk=k, depth=s,
                                            num_verify_tokens=n, mask_mode="qlen_only"))
    cand = tree.draft_tokens.view(b, n)
    links = (cand, tree.retrieve_index, tree.retrieve_next_token, tree.retrieve_next_sibling)
    logits = torch.randn(b, n, v, generator=gen)
    # make each node's argmax its first child's token half of the time: paths get accepted
    nt = tree.retrieve_next_token
    for r in range(b):
        for j in range(n):
            child = int(nt[r, j])
            if child >= 0 and bool(torch.rand(1, generator=gen) < 0.6):
                logits[r, j, int(cand[r, child])] = 10.0
    return links, logits, s


def _path_nodes(result, retrieve_index):
    """{(request, node)}: the nodes on each request's accepted path (their rows are read)."""
    nodes = set()
    for r in range(retrieve_index.shape[0]):
        where = {int(x): j for j, x in enumerate(retrieve_index[r].tolist())}
        for x in result.accept_index[r].tolist():
            if x >= 0:
                nodes.add((r, where[x]))
    return nodes


@pytest.mark.parametrize("seed", range(6))
def test_tree_greedy_default_checks_the_rows_on_the_accepted_paths(seed):
    links, logits, depth = _inputs(seed)
    clean = verify_tree_greedy(*links, depth=depth, target_logits=logits)
    read = _path_nodes(clean, links[1])
    assert any(len([1 for r2, _ in read if r2 == r]) > 1 for r in range(logits.shape[0]))
    b, n, _ = logits.shape
    for r in range(b):
        for j in range(n):
            bad = logits.clone()
            bad[r, j, 123] = float("nan")
            if (r, j) in read:
                with pytest.raises(KernelInputError) as err:
                    verify_tree_greedy(*links, depth=depth, target_logits=bad)
                assert err.value.code == "SR904" and f"target_logits[{r}, {j}]" in str(err.value)
            else:
                got = verify_tree_greedy(*links, depth=depth, target_logits=bad)
                assert torch.equal(got.output_tokens, clean.output_tokens)
                assert torch.equal(got.accept_index, clean.accept_index)
            with pytest.raises(KernelInputError) as err:
                verify_tree_greedy(*links, depth=depth, target_logits=bad, check_values=True)
            assert err.value.code == "SR904"
