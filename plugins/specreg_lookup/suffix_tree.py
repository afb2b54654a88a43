"""arctic-inference's suffix tree in Python: every suffix of its sequences cut at `max_depth`
tokens, with occurrence counts, arctic's order among a node's children, and exact scores.

The rule is arctic-inference's `SuffixTree` (csrc/suffix_decoding/suffix_tree.cc, unchanged from
v0.1.0 to 0.3.0), told as an uncompressed trie (path compression changes no count) whose
suffixes seen once are left as tails read from their sequence (`suffix_tree_nodes`):

- A node's children are kept in arctic's sibling order (`suffix_tree_nodes`). The walk takes
  the first child (a path) or visits children in that order (a tree).
- Probabilities are exact: along a walk from the matched node (count N) every drafted node's
  probability is its count / N (the product of count ratios telescopes), so a draft's score is
  an integer sum over N and two scores compare by cross-multiplying. arctic multiplies float32
  ratios and sums float32s, so scores that are equal can come out unequal and a tie goes
  whichever way the rounding fell (on 1 0 1 0 1 0 1 0 1 matches of length 3, 4 and 5 all score
  2, and the rule gives a tie to the longer match). `min_token_prob` is read as the decimal it
  was written as (0.1 is 1/10), and a token's count / N is compared with it exactly.
- Tree drafts pop nodes from a binary heap run exactly as libstdc++'s `std::priority_queue`
  over arctic's items (keys: the nodes' counts, the same order as their probabilities), so
  equal probabilities leave the heap in arctic's order, except where arctic's float32 products
  round two equal probabilities apart and the rounding orders them.
"""

from __future__ import annotations

import functools
from collections.abc import Sequence
from fractions import Fraction

import attrs

from specreg_lookup.suffix_tree_nodes import Node as _Node
from specreg_lookup.suffix_tree_nodes import Seq as _Seq


@attrs.frozen(kw_only=True)
class Score:
    """A draft's score as the exact fraction `total / base` (base: the matched node's count)."""

    total: int = 0
    base: int = 1

    def __ge__(self, other: object) -> bool:
        if not isinstance(other, Score):
            return NotImplemented
        return self.total * other.base >= other.total * self.base

    def __float__(self) -> float:
        return self.total / self.base


@attrs.frozen(kw_only=True)
class TreeDraft:
    """One tree's speculation: tokens, parents (-1: the match), score, match length."""

    tokens: list[int]
    parents: list[int]
    score: Score
    match_len: int


def exact_probability(value: float) -> Fraction:
    """`value` as the decimal it was written as (0.1 -> 1/10), for exact comparisons."""
    return Fraction(repr(float(value)))


class SuffixTree:
    """Every suffix of its sequences, cut at `max_depth` tokens, with occurrence counts.

    `extend(seq_id, tokens)` appends to a sequence, touching only the suffixes that are shared
    (a suffix seen once grows as a tail, `suffix_tree_nodes`); `remove(seq_id)` takes a
    sequence out again; `speculate(...)` is arctic-inference's rule, decided exactly.
    """

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.root = _Node(-1)
        self.root.kids = {}
        self._seqs: dict[int, _Seq] = {}

    def __contains__(self, seq_id: int) -> bool:
        return seq_id in self._seqs

    def tokens(self, seq_id: int) -> list[int]:
        """The sequence `seq_id` as inserted (read-only by convention)."""
        return self._seqs[seq_id].tokens

    def extend(self, seq_id: int, tokens: Sequence[int]) -> None:
        rec = self._seqs.get(seq_id)
        if rec is None:
            rec = self._seqs[seq_id] = _Seq()
        seq, active = rec.tokens, rec.active
        depth = self.max_depth
        root = self.root
        for token in tokens:
            seq.append(token)
            active.insert(0, root)
            i = 0
            for parent in active:  # shortest first: a longer suffix is shared only if these are
                kids = parent.kids
                if kids is not None:
                    child = kids.get(token)
                else:  # one child at most
                    child = parent.best
                    if child is not None and child.token != token:
                        child = None
                if child is None:
                    break
                if child.src is not None:
                    child.share()  # a second suffix reaches a count-1 node
                if parent.order is None:  # the only child, or the root's
                    child.count += 1
                else:
                    parent.raise_count(child)
                active[i] = child  # active[i] is now the suffix of length i + 1
                i += 1
            if i < len(active):  # these suffixes are new: each a count-1 node holding its tail
                end = len(seq)
                for j in range(i, len(active)):
                    parent = active[j]
                    child = _Node(token, 1)
                    if parent is root:  # the root's order is never read: a match has a token
                        root.kids[token] = child  # type: ignore[index]
                    else:
                        parent.add_child(child)
                    stop = end - j - 1 + depth
                    if stop > end:
                        child.src, child.pos, child.stop = rec, end, stop
                del active[i:]
            elif len(active) >= depth:
                active.pop()  # the suffix that reached max_depth tokens stops growing
            root.count += 1

    def remove(self, seq_id: int) -> None:
        seq = self._seqs.pop(seq_id).tokens
        root = self.root
        depth = self.max_depth
        for start in range(len(seq)):
            node = root
            node.count -= 1
            for token in seq[start : start + depth]:
                child: _Node = node.child(token)  # type: ignore[assignment]  # counted twice+: no tail
                if child.count == 1:
                    node.drop_child(child)
                    break
                node.lower_count(child)  # the root's children have no order: a plain count
                node = child

    def match(self, context: Sequence[int], seq_id: int | None = None) -> list[_Node | None]:
        """The nodes of context[-m:] for m = 1 .. len(context) - 1 (None once one fails), every
        one explicit (tails on the way are exposed).

        Where `context` ends like sequence `seq_id`, the nodes its shared suffixes reached
        (kept by `extend`) are those of the shorter matches: only longer ones walk from the root.
        """
        context = list(context)
        out: list[_Node | None] = list(self._own(context, seq_id)[0])
        for m in range(len(out) + 1, len(context)):
            node: _Node | None = self.root
            for token in context[len(context) - m :]:
                node = node.children.get(token) if node is not None else None
                if node is None:
                    break
            out.append(node)
            if node is None:
                break
        return out

    def _own(self, context: list[int], seq_id: int | None) -> tuple[list[_Node], int]:
        """The nodes of the matches that end `seq_id`'s shared suffixes, shortest first, and how
        many longer matches go on as its own unshared suffix, where the shared ones all
        matched (the context ends like the sequence): each such match is a count-1 node with
        nothing below (the sequence ends there), and none longer matches at all (its one
        occurrence ends the sequence, which the context leaves)."""
        rec = self._seqs.get(seq_id) if seq_id is not None else None
        if rec is None:
            return [], 0
        active, seq = rec.active, rec.tokens
        n, c = len(seq), len(context)
        m = c - 1 if c - 1 < len(active) else len(active)
        if m > 0 and seq[n - m :] != context[c - m :]:
            return [], 0
        nodes = active[:m]
        if m != len(active) or m >= self.max_depth - 1:
            return nodes, 0  # a shorter shared suffix failed, or every growing one is shared
        top = min(c - 1, n, self.max_depth)
        if m >= top:
            return nodes, 0
        if seq[n - top :] == context[c - top :]:  # the usual case, compared in one go
            return nodes, top - m
        k = m
        while seq[n - k - 1] == context[c - k - 1]:  # stops before top
            k += 1
        return nodes, k - m

    def speculate(self, context: Sequence[int], max_spec_tokens: int, max_spec_factor: float,
                  max_spec_offset: float, min_token_prob: float | Fraction, tree: bool,
                  seq_id: int | None = None) -> TreeDraft:
        """arctic-inference's SuffixTree::speculate: for each match length m, up to
        min(max_spec_tokens, m * max_spec_factor + max_spec_offset) tokens walked from the
        match; the best score wins, a tie going to the longer match. `min_token_prob` may be
        given as its `exact_probability` already."""
        min_prob = (min_token_prob if isinstance(min_token_prob, Fraction)
                    else exact_probability(min_token_prob))
        tokens, parents, total, base, m = self.best(
            context, max_spec_tokens, max_spec_factor, max_spec_offset,
            (min_prob.numerator, min_prob.denominator), tree, seq_id)
        return TreeDraft(tokens=tokens, parents=parents, score=Score(total=total, base=base),
                         match_len=m)

    def best(self, context: Sequence[int], max_spec_tokens: int, max_spec_factor: float,
             max_spec_offset: float, floor: tuple[int, int], tree: bool,
             seq_id: int | None = None) -> tuple[list[int], list[int], int, int, int]:
        """`speculate` as (tokens, parents, total, base, match length), `min_token_prob` as its
        exact (numerator, denominator): the score is total / base."""
        if type(context) is not list:
            context = list(context)
        nodes: list
        if tree:
            nodes = self.match(context, seq_id)
            extra = 0
        else:  # tails read in place: nothing is exposed
            nodes, extra = self._own(context, seq_id)
            if not extra:
                nodes = _locate(self.root, context, nodes)
        best: tuple[list[int], list[int], int, int, int] = ([], [], 0, 1, 0)  # .., total, base, m
        depth = self.max_depth
        count = len(nodes)
        floor_num, floor_den = floor
        limits = _limits(max_spec_tokens, max_spec_factor, max_spec_offset, count)
        for m in range(1, count + 1):
            node = nodes[m - 1]
            if node is None:
                break
            limit = limits[m]
            if type(node) is tuple:  # inside a tail: count 1, one chain of count-1 nodes
                src, pos, stop = node
                if best[2] > best[3] * limit:  # best's score beats any draft of `limit` tokens
                    continue
                end = pos + limit if floor_den >= floor_num else pos  # each is 1/1 >= min_prob
                end = stop if stop < end else end
                run = src.tokens[pos:end]
                if len(run) * best[3] >= best[2]:
                    best = (run, list(range(-1, len(run) - 1)), len(run), 1, m)
                continue
            longer = nodes[m] if m < count else None
            if (limit < depth - m and longer is not None and type(longer) is not tuple
                    and longer.count == node.count):
                # every occurrence of this match extends to the longer one, whose subtree is this
                # one's (to the depth the walk reaches, children in the same order): its draft is
                # this one's, with a limit at least as large, and a tie goes to the longer match
                continue
            tokens, parents, total = (_walk_tree(node, limit, floor) if tree
                                      else _walk_path(node, limit, floor_num, floor_den))
            if total * best[3] >= best[2] * node.count:  # total / count >= best's, exactly
                best = (tokens, parents, total, node.count, m)
        if extra and best[2] == 0:  # count-1 matches drafting nothing: a tie to the longest
            best = ([], [], 0, 1, count + extra)
        return best


@functools.lru_cache(maxsize=1024)
def _limits(max_spec_tokens: int, factor: float, offset: float, count: int) -> tuple[int, ...]:
    """The draft length for each match length m <= count (index m): arctic's
    min(max_spec_tokens, m * factor + offset), at least 0."""
    return tuple(max(0, min(max_spec_tokens, int(m * factor + offset + 1e-6)))
                 for m in range(count + 1))


def _locate(root: _Node, context: Sequence[int], nodes: list) -> list:
    """`nodes` (the shorter matches) followed by the longer matches walked from the root, tails
    read in place: a match inside one is (owner, position of the next token, stop)."""
    c = len(context)
    for m in range(len(nodes) + 1, c):
        node = root
        at = c - m
        found: object = None
        while at < c:
            child = node.child(context[at])
            if child is None:
                src = node.src
                if src is not None:  # the rest must be the tail's tokens, up to its end
                    pos = node.pos
                    rest = c - at
                    if pos + rest <= node.stop and src.tokens[pos : pos + rest] == list(
                            context[at:]):
                        found = (src, pos + rest, node.stop)
                break
            node = child
            at += 1
        else:
            found = node
        nodes.append(found)
        if found is None:
            break
    return nodes


def _walk_path(node: _Node, limit: int, floor_num: int, floor_den: int
               ) -> tuple[list[int], list[int], int]:
    """The first child at each step while its count / N is at least min_prob (floor_num /
    floor_den), a tail read in place (its nodes count 1)."""
    tokens: list[int] = []
    least = floor_num * node.count
    total = 0
    left = limit
    while left > 0:
        child = node.best
        if child is None:
            src = node.src
            if src is not None and floor_den >= least:
                end = node.pos + left
                end = node.stop if node.stop < end else end
                run = src.tokens[node.pos : end]
                tokens += run
                total += len(run)
            break
        count = child.count
        if count * floor_den < least:
            break
        tokens.append(child.token)
        total += count
        node = child
        left -= 1
    return tokens, list(range(-1, len(tokens) - 1)), total


def _walk_tree(node: _Node, limit: int, floor: tuple[int, int]
               ) -> tuple[list[int], list[int], int]:
    """The most probable nodes first, each at least min_prob, popped as arctic's heap pops.

    arctic's heap holds two kinds of item: a token to emit (which pushes its continuation) and
    the end of a compressed node (which pushes the node's children in order). A node ends
    where a suffix ends or the path branches (`_ends_node`), so the items, and the order equal
    probabilities leave the heap in, follow from the counts alone."""
    tokens: list[int] = []
    parents: list[int] = []
    base = node.count
    floor_num, floor_den = floor
    total = 0
    # (count, node, parent slot, expand): expand=True pushes the node's children
    heap: list[tuple[int, _Node, int, bool]] = []
    _heap_push(heap, _after(node, base, -1))
    while heap and len(tokens) < limit:
        count, at, parent, expand = _heap_pop(heap)
        if not expand:
            tokens.append(at.token)
            parents.append(parent)
            total += count
            _heap_push(heap, _after(at, count, len(tokens) - 1))
            continue
        for child in at.ordered_children():
            if child.count * floor_den < floor_num * base:
                break
            _heap_push(heap, (child.count, child, parent, False))
    return tokens, parents, total


def _after(node: _Node, count: int, slot: int) -> tuple[int, _Node, int, bool]:
    """The item arctic pushes once `node`'s token is out (or for the match itself): its only
    child, inside the same compressed node, or the end of the node."""
    if len(node.children) == 1:
        (child,) = node.children.values()
        if child.count == node.count:
            return (count, child, slot, False)
    return (count, node, slot, True)


# libstdc++'s std::push_heap / std::pop_heap (bits/stl_heap.h), a max-heap on the first field.
def _sift_up(heap: list, hole: int, top: int, item: tuple) -> None:
    parent = (hole - 1) // 2
    while hole > top and heap[parent][0] < item[0]:
        heap[hole] = heap[parent]
        hole = parent
        parent = (hole - 1) // 2
    heap[hole] = item


def _heap_push(heap: list, item: tuple) -> None:
    heap.append(item)
    _sift_up(heap, len(heap) - 1, 0, item)


def _heap_pop(heap: list) -> tuple:
    top = heap[0]
    last = heap.pop()
    size = len(heap)
    if size:
        hole, second = 0, 0
        while second < (size - 1) // 2:
            second = 2 * (second + 1)
            if heap[second][0] < heap[second - 1][0]:
                second -= 1
            heap[hole] = heap[second]
            hole = second
        if size % 2 == 0 and second == (size - 2) // 2:
            second = 2 * (second + 1)
            heap[hole] = heap[second - 1]
            hole = second - 1
        _sift_up(heap, hole, 0, last)
    return top
