"""The lookup plugin's kernels against their plain references: vLLM's ngram rule, the match trees,
tree verification."""

from __future__ import annotations

import random

import pytest
import torch
from specreg_lookup.kernels.match_tree import build_tree
from specreg_lookup.kernels.match_tree.reference import tree_row
from specreg_lookup.kernels.ngram_match import chain_proposals
from specreg_lookup.kernels.ngram_match.reference import propose_row
from specreg_lookup.kernels.tree_verify import verify_tree_greedy
from specreg_lookup.kernels.tree_verify.reference import verify_row

from specreg.errors import KernelInputError


def _padded(rows: list[list[int]], pad: int = 7) -> tuple[torch.Tensor, torch.Tensor]:
    width = max(map(len, rows))
    tokens = torch.tensor([r + [pad] * (width - len(r)) for r in rows])
    return tokens, torch.tensor([len(r) for r in rows])


def _random_rows(rng: random.Random, b: int, vocab: int) -> list[list[int]]:
    return [[rng.randrange(vocab) for _ in range(rng.randrange(1, 40))] for _ in range(b)]


@pytest.mark.parametrize(
    "history, low, high, k, expected",
    [
        # the longest n-gram wins, and of its occurrences the EARLIEST (vLLM), not the latest
        ([1, 2, 3, 9, 1, 2, 4, 5, 1, 2], 1, 3, 2, [3, 9]),
        ([1, 2, 3, 9, 5, 1, 2], 2, 2, 4, [3, 9, 5, 1]),
        ([4, 1, 2, 1, 2, 1], 1, 3, 5, [2, 1]),  # fewer than k follow: what follows, not a cycle
        ([1, 2, 3], 1, 3, 3, []),  # no match: nothing proposed
        ([1, 4, 2, 4], 2, 3, 3, []),  # only a 1-gram would match
        ([5], 1, 1, 2, []),
        ([3, 3, 3, 3], 1, 2, 4, [3, 3]),  # overlapping occurrences count
    ],
)
def test_chain_rule_is_vllms(history, low, high, k, expected):
    assert propose_row(history, low, high, k) == expected
    tokens, lengths = _padded([history])
    assert chain_proposals(tokens, lengths, min_ngram=low, max_ngram=high, k=k).as_lists() == [
        expected
    ]


def test_chain_proposals_equal_the_reference_on_random_batches():
    rng = random.Random(0)
    for _ in range(120):
        rows = _random_rows(rng, 5, rng.choice([2, 3, 6]))
        low = rng.randint(1, 3)
        high = rng.randint(low, 5)
        k = rng.randint(1, 7)
        tokens, lengths = _padded(rows)
        got = chain_proposals(tokens, lengths, min_ngram=low, max_ngram=high, k=k)
        assert got.as_lists() == [propose_row(r, low, high, k) for r in rows]
        # the filler is the last token: a fixed-width verify may run it
        for row, drafts, n in zip(rows, got.tokens.tolist(), got.num_drafts.tolist(), strict=True):
            assert drafts[n:] == [row[-1]] * (k - n)


@pytest.mark.parametrize("vocab", [2, 5, 1000])
def test_chain_proposals_from_candidates_equal_the_dense_rule(vocab):
    """The candidate-only path (positions after the last token) against every position's match
    length: the same drafts, counts, starts and n-gram lengths, ties and no-match rows included."""
    from specreg_lookup.kernels.ngram_match.torch_impl import _chain_proposals_dense

    rng = random.Random(vocab)
    for _ in range(60):
        rows = _random_rows(rng, rng.randint(1, 6), vocab) + [[3], [1, 1]]
        low = rng.randint(1, 3)
        high = rng.randint(low, 5)
        k = rng.randint(1, 6)
        tokens, lengths = _padded(rows, pad=rng.randrange(vocab))
        got = chain_proposals(tokens, lengths, min_ngram=low, max_ngram=high, k=k)
        want = _chain_proposals_dense(tokens, lengths, low, high, k)
        for field in ("tokens", "num_drafts", "start", "ngram_len"):
            assert torch.equal(getattr(got, field), getattr(want, field)), field
    empty = chain_proposals(torch.zeros(0, 4, dtype=torch.long), torch.zeros(0, dtype=torch.long),
                            min_ngram=1, max_ngram=2, k=3)
    assert empty.tokens.shape == (0, 3)


def test_trees_equal_the_reference_on_random_batches():
    rng = random.Random(1)
    for _ in range(120):
        rows = _random_rows(rng, 4, rng.choice([2, 3, 5]))
        low = rng.randint(1, 2)
        high = rng.randint(low, 4)
        nodes, breadth = rng.randint(2, 10), rng.randint(1, 6)
        match_type = rng.choice(["bfs", "prob"])
        tokens, lengths = _padded(rows)
        tree = build_tree(tokens, lengths, min_ngram=low, max_ngram=high, breadth=breadth,
                          num_nodes=nodes, match_type=match_type)
        for i, row in enumerate(rows):
            want_tokens, want_parents = tree_row(row, min_ngram=low, max_ngram=high,
                                                 breadth=breadth, num_nodes=nodes,
                                                 match_type=match_type)
            m = int(tree.valid[i].sum())
            assert tree.valid[i, :m].all() and not tree.valid[i, m:].any()
            assert tree.tokens[i, :m].tolist() == want_tokens
            assert tree.parents[i, :m].tolist() == want_parents
            depth = tree.depth[i].tolist()
            assert all(depth[c] == depth[want_parents[c]] + 1 for c in range(1, m))


def test_tree_merges_shared_prefixes_and_orders_breadth_first():
    # "a b" occurs twice before the tail "a b": continuations [c, d] (earlier) and [c, e]
    history = [1, 2, 3, 4, 9, 1, 2, 3, 5, 9, 1, 2]
    tokens, lengths = _padded([history])
    tree = build_tree(tokens, lengths, min_ngram=2, max_ngram=2, breadth=2, num_nodes=5)
    # root 2; depth 1: the shared 3; depth 2: 5 (more recent match) then 4; then 9 under 5
    assert tree.tokens[0].tolist() == [2, 3, 5, 4, 9]
    assert tree.parents[0].tolist() == [-1, 0, 1, 1, 2]


def test_tree_verify_greedy_equals_the_reference():
    rng = random.Random(2)
    for _ in range(60):
        rows = _random_rows(rng, 3, 3)
        tokens, lengths = _padded(rows)
        tree = build_tree(tokens, lengths, min_ngram=1, max_ngram=3, breadth=4, num_nodes=7)
        logits = torch.randn(3, 7, 3, generator=torch.Generator().manual_seed(rng.randrange(99)))
        out = verify_tree_greedy(tree, logits)
        choice = logits.argmax(-1)
        for i in range(3):
            emitted, path = verify_row(tree.tokens[i].tolist(), tree.parents[i].tolist(),
                                       tree.valid[i].tolist(), choice[i].tolist())
            n = int(out.num_accepted[i]) + 1
            assert out.output_tokens[i, :n].tolist() == emitted
            assert (out.output_tokens[i, n:] == -1).all()
            assert out.accepted_index[i, :n].tolist() == [7 * i + p for p in path]
            assert int(out.bonus[i]) == emitted[-1]


def test_padding_nodes_never_accept():
    history = [1, 2, 1]  # one match: the tree holds 1 proposed node of 4 slots
    tokens, lengths = _padded([history])
    tree = build_tree(tokens, lengths, min_ngram=1, max_ngram=1, breadth=4, num_nodes=4)
    assert tree.valid[0].tolist() == [True, True, True, False]
    logits = torch.zeros(1, 4, 3)
    logits[0, :, 1] = 5.0  # the target wants token 1 everywhere: a padded slot holds root 1
    out = verify_tree_greedy(tree, logits)
    assert int(out.num_accepted[0]) == 0  # 2 is proposed, 1 is wanted; padding is not a draft


def test_bad_history_is_a_coded_error():
    with pytest.raises(KernelInputError, match="SR90"):
        chain_proposals(torch.zeros(2, 3), torch.tensor([1, 2]), min_ngram=1, max_ngram=2, k=2)
    with pytest.raises(KernelInputError, match="SR90"):
        chain_proposals(torch.zeros(2, 3, dtype=torch.long), torch.tensor([1, 4]), min_ngram=1,
                        max_ngram=2, k=2)
