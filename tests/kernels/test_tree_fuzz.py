"""Fuzz the core tree kernels (torch path; trees drafted by EAGLE's draft helpers): correct
shapes/ranges or coded errors, and every verdict justified by an independent validity predicate
(`tests.support.tree_validity`): a refusal only of input the predicate calls invalid, a result
only for input it calls valid (CPU, value checks on)."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from specreg_eagle.kernels.select_topk import organize_draft_results, select_top_k_tokens
from specreg.kernels.tree_build import build_tree
from specreg.kernels.tree_verify_greedy import verify_tree_greedy
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg.contract.tree_sizes import num_draft_ids

from tests.support.chain_validity import acceptance_is_justified, refusal_is_justified
from tests.support.fuzz import coded_or_result, fuzz_settings
from tests.support.kernel_inputs import all_meta, float_tensor, index_tensor
from tests.support.tree_validity import (
    build_tree_problems,
    tree_greedy_problems,
    tree_sampling_problems,
)

pytestmark = pytest.mark.fuzz

tree_dims = st.fixed_dictionaries(
    {"b": st.integers(0, 3), "k": st.integers(1, 3), "s": st.integers(1, 3), "v": st.integers(1, 6)}
)


@st.composite
def drafted_tree(draw, d):
    """A tree from the real draft helpers (valid), then perhaps corrupted by the strategies."""
    b, k, s, v = d["b"], d["k"], d["s"], d["v"]
    gen = torch.Generator().manual_seed(draw(st.integers(0, 2**31 - 1)))
    hidden = torch.zeros(b, 2)
    topk_p = torch.rand(b, k, generator=gen)
    topk_index = torch.randint(0, v, (b, k), generator=gen)
    scores = None
    lists = ([], [], [])
    for i in range(s):
        _, hidden, scores, info = select_top_k_tokens(i, topk_p, topk_index, hidden, scores, k)
        for out, part in zip(lists, info, strict=True):
            out.append(part)
        topk_p = torch.rand(b * k, k, generator=gen)
        topk_index = torch.randint(0, v, (b * k, k), generator=gen)
    n = draw(st.integers(2, max(2, min(num_draft_ids(k, s), 8))))
    parent_list, top_idx, draft = organize_draft_results(*lists, n)
    return parent_list, top_idx, draft, n


def _assert_justified(error, problems):
    """A refusal needs a reason the predicate also finds; a result needs valid input."""
    if error is not None:
        assert refusal_is_justified(problems), f"refused valid input: {error}"
    else:
        assert acceptance_is_justified(problems), f"accepted invalid input: {problems}"


@fuzz_settings(300)
@given(data=st.data(), d=tree_dims, mode=st.sampled_from(["full", "qlen_only", "qlen_only_bitpacking", "x"]))
def test_build_tree_and_verify(data, d, mode):
    b, k, s, v = d["b"], d["k"], d["s"], d["v"]
    parent_list, top_idx, draft, n = data.draw(drafted_tree(d))
    if data.draw(st.booleans()):  # corrupt one input
        which = data.draw(st.integers(0, 2))
        shapes = [parent_list.shape, top_idx.shape, draft.shape]
        bad = data.draw(index_tensor(shapes[which], -2, num_draft_ids(k, s) + 2, odd=0.6))
        parent_list, top_idx, draft = [bad if i == which else t for i, t in
                                       enumerate((parent_list, top_idx, draft))]  # fmt: skip
    bonus = data.draw(index_tensor((b,), 0, v))
    # Huge prefix lengths are left out: the full mask is sized by sum(seq_lens) (reported).
    seq_lens = data.draw(index_tensor((b,), 0, 9, huge=False))
    build = dict(topk=k, depth=s, num_verify_tokens=n, mask_mode=mode)
    tree, error = coded_or_result(
        lambda: build_tree(bonus, parent_list, top_idx, draft, seq_lens, **build)
    )
    _assert_justified(error, build_tree_problems(bonus, parent_list, top_idx, draft, seq_lens,
                                                 **build))
    if error is not None or all_meta(bonus, parent_list, top_idx, draft, seq_lens):
        return
    assert tree.retrieve_index.shape == (b, n)
    nxt, sib = tree.retrieve_next_token, tree.retrieve_next_sibling
    assert bool((((nxt >= 1) & (nxt < n)) | (nxt == -1)).all())
    assert bool((((sib >= 1) & (sib < n)) | (sib == -1)).all())
    cands = tree.draft_tokens.view(b, n)
    logits = data.draw(float_tensor((b, n, v), probabilities=True, odd=0.3))
    links = (cands, tree.retrieve_index, nxt, sib)
    keys = torch.full((b,), 3)
    draft = logits if data.draw(st.booleans()) else None
    for call, problems in (
        (lambda: verify_tree_greedy(*links, depth=s, target_logits=logits, check_values=True),
         lambda: tree_greedy_problems(*links, depth=s, target_logits=logits)),
        (lambda: verify_tree_sampling(*links, logits, depth=s, keys=keys, draft_probs=draft),
         lambda: tree_sampling_problems(*links, logits, depth=s, keys=keys, draft_probs=draft)),
    ):  # fmt: skip
        result, error = coded_or_result(call)
        _assert_justified(error, problems())
        if error is None and not all_meta(logits):
            assert result.accept_len.shape == (b,)
            assert bool(((result.accept_len >= 0) & (result.accept_len <= min(s, n - 1))).all())
            assert bool(((result.bonus >= 0) & (result.bonus < v)).all())


@fuzz_settings(200)
@given(data=st.data(), b=st.integers(0, 3), n=st.integers(0, 5), v=st.integers(0, 6),
       depth=st.one_of(st.integers(-1, 5), st.sampled_from([True, 2.0])))  # fmt: skip
def test_verify_tree_random_links(data, b, n, v, depth):
    links = [data.draw(index_tensor((b, n), lo, hi, odd=0.5))
             for lo, hi in ((0, v), (0, b * n), (-1, n), (-1, n))]  # fmt: skip
    probs = data.draw(float_tensor((b, n, v), probabilities=True))
    for call, problems in (
        (lambda: verify_tree_greedy(*links, depth=depth, target_logits=probs,
                                    check_values=True),
         lambda: tree_greedy_problems(*links, depth=depth, target_logits=probs)),
        (lambda: verify_tree_greedy(*links, depth=depth, target_predict=links[0]),
         lambda: tree_greedy_problems(*links, depth=depth, target_predict=links[0])),
        (lambda: verify_tree_sampling(*links, probs, depth=depth, generator=torch.Generator()),
         lambda: tree_sampling_problems(*links, probs, depth=depth)),
    ):  # fmt: skip
        result, error = coded_or_result(call)
        _assert_justified(error, problems())
        if error is None and not all_meta(probs, *links):
            assert result.accept_len.shape == (b,)
