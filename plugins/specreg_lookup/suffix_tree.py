"""arctic-inference's suffix tree in Python: every suffix of its sequences cut at `max_depth`
tokens, with occurrence counts, arctic's order among a node's children, and exact scores.

The rule is arctic-inference's `SuffixTree` (csrc/suffix_decoding/suffix_tree.cc, unchanged from
v0.1.0 to 0.3.0), told without its path compression, which changes no count:

- A node's children are kept in arctic's sibling order: by decreasing count, and among equal
  counts as its linked lists leave them. A new child goes last. A child whose count rises joins
  the front of its new count's children when it led its old count's, their back otherwise; a
  child whose count falls joins the front of its new count's children. The walk takes the first
  child (a path) or visits children in that order (a tree).
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

from collections import OrderedDict
from collections.abc import Sequence
from fractions import Fraction

import attrs


class _Order:
    """The order of a node's two or more children: count -> the children with that count, in
    arctic's order (`groups`), and the highest count (`top`)."""

    __slots__ = ("groups", "top")

    def __init__(self, first: _Node) -> None:
        self.groups: dict[int, OrderedDict[_Node, None]] = {first.count: OrderedDict({first: None})}
        self.top = first.count

    def head(self) -> _Node:
        return next(iter(self.groups[self.top]))

    def ordered(self) -> list[_Node]:
        groups = self.groups
        return [c for count in sorted(groups, reverse=True) for c in groups[count]]

    def join(self, child: _Node, *, front: bool) -> None:
        """`child` enters its count's group, first or last."""
        group = self.groups.get(child.count)
        if group is None:
            group = self.groups[child.count] = OrderedDict()
        group[child] = None
        if front:
            group.move_to_end(child, last=False)
        if child.count > self.top:
            self.top = child.count

    def leave(self, child: _Node) -> bool:
        """`child` leaves its count's group; whether it was the group's first."""
        count = child.count
        group = self.groups[count]
        led = next(iter(group)) is child
        del group[child]
        if not group:
            del self.groups[count]
            if count == self.top:
                self.top = max(self.groups, default=0)
        return led


class _Node:
    """One trie node: how many inserted suffixes pass through or end at it, its children by
    token, the first of them in arctic's order (`best`; not kept for the root, whose order no
    match reads) and, while it has two or more, their whole order."""

    __slots__ = ("best", "children", "count", "order", "token")

    def __init__(self, token: int, count: int = 0) -> None:
        self.token = token
        self.count = count
        self.children: dict[int, _Node] = {}
        self.best: _Node | None = None
        self.order: _Order | None = None

    def ordered_children(self) -> list[_Node]:
        if self.order is None:
            return list(self.children.values())
        return self.order.ordered()

    def add_sibling(self, child: _Node) -> None:
        """A new child (count 1) beside existing ones: last among them."""
        if self.order is None:  # the order starts when the second child comes
            assert self.best is not None
            self.order = _Order(self.best)
        self.order.join(child, front=False)

    def raise_count(self, child: _Node) -> None:
        """child.count += 1, moving it as arctic's `_increment_count` does: first among its new
        count's children if it was first among its old count's, else last."""
        order = self.order
        if order is None:
            child.count += 1
            return
        led = order.leave(child)
        child.count += 1
        order.join(child, front=led)
        self.best = order.head()

    def lower_count(self, child: _Node) -> None:
        """child.count -= 1 (to at least 1), moving it as arctic's `_decrement_count` does:
        first among its new count's children."""
        order = self.order
        if order is None:
            child.count -= 1
            return
        order.leave(child)
        child.count -= 1
        order.join(child, front=True)
        self.best = order.head()

    def drop_child(self, child: _Node) -> None:
        """The child leaves with its subtree (its count reached 0)."""
        del self.children[child.token]
        order = self.order
        if order is None:
            self.best = None
            return
        order.leave(child)
        if len(self.children) == 1:
            self.order = None
            self.best = next(iter(self.children.values()))
        else:
            self.best = order.head()


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

    `extend(seq_id, tokens)` appends to a sequence in O(max_depth) per token; `remove(seq_id)`
    takes a sequence out again; `speculate(...)` is arctic-inference's rule, decided exactly.
    """

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.root = _Node(-1)
        self._seqs: dict[int, list[int]] = {}
        self._active: dict[int, list[_Node]] = {}  # nodes of the suffixes still growing

    def __contains__(self, seq_id: int) -> bool:
        return seq_id in self._seqs

    def tokens(self, seq_id: int) -> list[int]:
        """The sequence `seq_id` as inserted (read-only by convention)."""
        return self._seqs[seq_id]

    def extend(self, seq_id: int, tokens: Sequence[int]) -> None:
        seq = self._seqs.setdefault(seq_id, [])
        active = self._active.setdefault(seq_id, [])
        depth = self.max_depth
        root = self.root
        for token in tokens:
            seq.append(token)
            active.insert(0, root)
            for i, parent in enumerate(active):
                children = parent.children
                child = children.get(token)
                if child is None:
                    child = children[token] = _Node(token, 1)
                    if parent is not root:  # the root's order is never read: a match has a token
                        if parent.best is None:
                            parent.best = child
                        else:
                            parent.add_sibling(child)
                elif parent.order is None:  # the only child, or the root's
                    child.count += 1
                else:
                    parent.raise_count(child)
                active[i] = child  # active[i] is now the suffix of length i + 1
            if len(active) >= depth:
                active.pop()  # the suffix that reached max_depth tokens stops growing
            root.count += 1

    def remove(self, seq_id: int) -> None:
        seq = self._seqs.pop(seq_id)
        self._active.pop(seq_id, None)
        root = self.root
        for start in range(len(seq)):
            node = root
            node.count -= 1
            for token in seq[start : start + self.max_depth]:
                child = node.children[token]
                if child.count == 1:
                    node.drop_child(child)
                    break
                node.lower_count(child)  # the root's children have no order: a plain count
                node = child

    def match(self, context: Sequence[int], seq_id: int | None = None) -> list[_Node | None]:
        """The nodes of context[-m:] for m = 1 .. len(context) - 1 (None once one fails).

        Where `context` ends like sequence `seq_id`, the nodes its growing suffixes reached
        (kept by `extend`) are those of the shorter matches: only longer ones walk from the root.
        """
        last = len(context) - 1
        out: list[_Node | None] = []
        if seq_id is not None and seq_id in self._seqs:
            seq, active = self._seqs[seq_id], self._active[seq_id]
            known = min(last, len(active), len(seq))
            if seq[len(seq) - known :] == list(context[len(context) - known :]):
                out = list(active[:known])
        for m in range(len(out) + 1, last + 1):
            node: _Node | None = self.root
            for token in context[len(context) - m :]:
                node = node.children.get(token) if node is not None else None
                if node is None:
                    break
            out.append(node)
            if node is None:
                break
        return out

    def speculate(self, context: Sequence[int], max_spec_tokens: int, max_spec_factor: float,
                  max_spec_offset: float, min_token_prob: float | Fraction, tree: bool,
                  seq_id: int | None = None) -> TreeDraft:
        """arctic-inference's SuffixTree::speculate: for each match length m, up to
        min(max_spec_tokens, m * max_spec_factor + max_spec_offset) tokens walked from the
        match; the best score wins, a tie going to the longer match. `min_token_prob` may be
        given as its `exact_probability` already."""
        nodes = self.match(context, seq_id)
        walk = _walk_tree if tree else _walk_path
        min_prob = (min_token_prob if isinstance(min_token_prob, Fraction)
                    else exact_probability(min_token_prob))
        floor = (min_prob.numerator, min_prob.denominator)
        best: tuple[list[int], list[int], int, int, int] = ([], [], 0, 1, 0)  # .., total, base, m
        depth = self.max_depth
        for m, node in enumerate(nodes, start=1):
            if node is None:
                break
            limit = max(0, min(max_spec_tokens, int(m * max_spec_factor + max_spec_offset + 1e-6)))
            longer = nodes[m] if m < len(nodes) else None
            if longer is not None and longer.count == node.count and limit < depth - m:
                # every occurrence of this match extends to the longer one, whose subtree is this
                # one's (to the depth the walk reaches, children in the same order): its draft is
                # this one's, with a limit at least as large, and a tie goes to the longer match
                continue
            tokens, parents, total = walk(node, limit, floor)
            if total * best[3] >= best[2] * node.count:  # total / count >= best's, exactly
                best = (tokens, parents, total, node.count, m)
        tokens, parents, total, base, m = best
        return TreeDraft(tokens=tokens, parents=parents, score=Score(total=total, base=base),
                         match_len=m)


def _walk_path(node: _Node, limit: int, floor: tuple[int, int]
               ) -> tuple[list[int], list[int], int]:
    """The first child at each step while its count / N is at least min_prob (floor: its
    numerator and denominator)."""
    tokens: list[int] = []
    floor_num, floor_den = floor
    least = floor_num * node.count
    total = 0
    while len(tokens) < limit:
        child = node.best
        if child is None or child.count * floor_den < least:
            break
        tokens.append(child.token)
        total += child.count
        node = child
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
