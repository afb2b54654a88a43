"""The suffix tree's unshared tails change nothing a reader sees: the trie read through `children`
has every string's occurrence count, and drafts read tails in place as they read exposed nodes.

Sequences over one to three tokens overlap themselves and each other everywhere, so suffixes
turn shared, stop at max_depth, are removed and grow again while others read the tree.
"""

from __future__ import annotations

import random

import pytest
from specreg_lookup.suffix_tree import SuffixTree


def _trie(node, prefix=()):
    """(string, count) for every node under `node`, read through `children` (tails exposed)."""
    out = []
    for child in node.ordered_children():
        string = (*prefix, child.token)
        out.append((string, child.count))
        out.extend(_trie(child, string))
    return out


def _occurrences(seqs, string, depth):
    """How many suffixes, cut at `depth` tokens, start with `string`: its occurrences."""
    d = len(string)
    return sum(1 for s in seqs.values() for i in range(len(s) - d + 1)
               if tuple(s[i : i + d]) == string) if d <= depth else 0


def _draft(tree, context, seq_id, tree_mode, rng_args):
    return tree.best(context, *rng_args, tree_mode, seq_id=seq_id)


@pytest.mark.parametrize("seed", range(40))
def test_tails_read_as_the_trie_they_stand_for(seed):
    rng = random.Random(seed)
    depth = rng.choice([2, 3, 5, 8])
    vocab = rng.choice([1, 2, 3])
    lazy, exposed = SuffixTree(depth), SuffixTree(depth)  # `exposed` is read whole every step
    seqs: dict[int, list[int]] = {}
    for _ in range(30):
        if seqs and rng.random() < 0.1:
            sid = rng.choice(list(seqs))
            lazy.remove(sid)
            exposed.remove(sid)
            del seqs[sid]
        else:
            sid = rng.randrange(4)
            tokens = [rng.randrange(vocab) for _ in range(rng.randint(1, 5))]
            lazy.extend(sid, tokens)
            exposed.extend(sid, tokens)
            seqs.setdefault(sid, []).extend(tokens)
        trie = _trie(exposed.root)
        assert len({s for s, _ in trie}) == len(trie)
        assert all(count == _occurrences(seqs, s, depth) for s, count in trie)
        assert sum(1 for s in {tuple(q[i : i + d]) for q in seqs.values()
                               for d in range(1, depth + 1) for i in range(len(q) - d + 1)}
                   ) == len(trie)  # every string that occurs is a node
        for sid, seq in seqs.items():
            context = seq[-rng.randint(1, depth + 1) :]
            args = (rng.randint(1, 6), 1.0, rng.choice([0.0, 2.0]),
                    rng.choice([(1, 10), (1, 2), (1, 1), (0, 1)]))
            for tree_mode in (False, True):
                for use in (sid, None):
                    assert (_draft(lazy, context, use, tree_mode, args)
                            == _draft(exposed, context, use, tree_mode, args)), (sid, context)
    assert _trie(lazy.root) == _trie(exposed.root)  # sibling orders too


def test_a_tail_shared_at_its_end_makes_its_suffix_shared_again():
    """[1, 2, 3] then [9, 1, 2, 3]: the second reaches the ends of the first's growing suffixes,
    which then grow as shared nodes; both continue alike."""
    tree = SuffixTree(8)
    tree.extend(0, [1, 2, 3])
    tree.extend(1, [9, 1, 2, 3])
    tree.extend(0, [4])
    tree.extend(1, [4])
    node = tree.root
    for token in (1, 2, 3, 4):
        node = node.children[token]
        assert node.count == 2
    assert tree.best([7, 1, 2], 4, 2.0, 0.0, (1, 10), False) == ([3, 4], [-1, 0], 4, 2, 2)
