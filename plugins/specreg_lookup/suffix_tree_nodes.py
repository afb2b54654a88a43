"""The suffix tree's nodes: counts, arctic's sibling order, and the unshared tails left implicit.

A node's children are kept in arctic's sibling order: by decreasing count, and among equal counts
as its linked lists leave them. A new child goes last. A child whose count rises joins the front
of its new count's children when it led its old count's, their back otherwise; a child whose
count falls joins the front of its new count's children.

A suffix seen once (count 1) below its first count-1 node is a chain of count-1 nodes that only
grows: that node holds it as a *tail* (the owner sequence, the position of the next token, and
where the suffix stops at max_depth) instead of one node per token. The tail's tokens are read
from the owner's token list, so a suffix seen once grows with its sequence at no cost (as
arctic's leaves extend in place). Whoever reads a node's `children` sees the same trie: reading
them pushes the tail down one node (`expose`), which changes no count and no order.
"""

from __future__ import annotations

from bisect import bisect_left, bisect_right


class Seq:
    """One sequence of a tree: its tokens, and the nodes its growing suffixes reached while they
    are shared (`active[i]`: the suffix of length i + 1); longer ones are tails."""

    __slots__ = ("active", "tokens")

    def __init__(self) -> None:
        self.tokens: list[int] = []
        self.active: list[Node] = []


def _rank(node: Node) -> int:
    return -node.count


class Order:
    """The order of a node's two or more children: one list in arctic's order (`ranked`), its
    counts non-increasing, so a count's children are one run of it, found by bisection."""

    __slots__ = ("ranked",)

    def __init__(self, first: Node) -> None:
        self.ranked: list[Node] = [first]

    def head(self) -> Node:
        return self.ranked[0]

    def ordered(self) -> list[Node]:
        return list(self.ranked)

    def join(self, child: Node, *, front: bool) -> None:
        """`child` enters its count's run, first or last."""
        ranked = self.ranked
        count = child.count
        if front:
            if ranked[0].count <= count:  # its run, if any, starts the list
                ranked.insert(0, child)
            else:
                ranked.insert(bisect_left(ranked, -count, key=_rank), child)
        elif ranked[-1].count >= count:  # its run, if any, ends the list
            ranked.append(child)
        else:
            ranked.insert(bisect_right(ranked, -count, key=_rank), child)

    def leave(self, child: Node) -> bool:
        """`child` leaves its count's run; whether it was the run's first."""
        ranked = self.ranked
        if ranked[0] is child:
            del ranked[0]
            return True
        start = bisect_left(ranked, -child.count, key=_rank)
        if ranked[start] is child:
            del ranked[start]
            return True
        del ranked[ranked.index(child, start + 1)]
        return False


class Node:
    """One trie node: how many inserted suffixes pass through or end at it, its explicit children
    by token (`kids`; None while `best` is the only one, which most nodes have), the first of
    them in arctic's order (`best`; not kept for the root, whose `kids` are always a dict), while
    it has two or more their whole order, and, on a count-1 node whose suffix goes on unshared,
    its tail: the owner (`src`), the owner's position of the next token (`pos`) and the position
    the suffix stops at (`stop`, > pos)."""

    __slots__ = ("best", "count", "kids", "order", "pos", "src", "stop", "token")

    def __init__(self, token: int, count: int = 0) -> None:
        self.token = token
        self.count = count
        self.kids: dict[int, Node] | None = None
        self.best: Node | None = None
        self.order: Order | None = None
        self.src: Seq | None = None
        self.pos = 0
        self.stop = 0

    @property
    def children(self) -> dict[int, Node]:
        """The children by token, the tail's next node made explicit first (read-only)."""
        if self.src is not None:
            self.expose()
        if self.kids is not None:
            return self.kids
        return {} if self.best is None else {self.best.token: self.best}

    def child(self, token: int) -> Node | None:
        """The explicit child for `token` (a node counted twice or more has no tail)."""
        kids = self.kids
        if kids is not None:
            return kids.get(token)
        best = self.best
        return best if best is not None and best.token == token else None

    def expose(self) -> None:
        """The tail's next token, where the owner has it already, becomes an explicit child
        holding the rest of the tail (count 1, the only child: no order to keep)."""
        src, pos = self.src, self.pos
        assert src is not None
        tokens = src.tokens
        if pos >= len(tokens):  # the owner's suffix ends here for now: the tail stays
            return
        child = Node(tokens[pos], 1)
        if pos + 1 < self.stop:
            child.src, child.pos, child.stop = src, pos + 1, self.stop
        if self.kids is not None:
            self.kids[child.token] = child
        self.best = child
        self.src = None

    def share(self) -> None:
        """A second suffix reaches this count-1 node: its tail, if any, leaves it. The next
        token becomes an explicit child, or, where the owner's suffix ends here, the owner's
        suffix becomes one of its shared ones again (the next in its `active`: every shorter
        one is shared too, and was reached first)."""
        src = self.src
        if src is None:
            return
        if self.pos < len(src.tokens):
            self.expose()
            return
        src.active.append(self)
        self.src = None

    def ordered_children(self) -> list[Node]:
        kids = self.children
        if self.order is None:
            return list(kids.values())
        return self.order.ordered()

    def add_child(self, child: Node) -> None:
        """A new child (count 1): the only one, or last among the others."""
        best = self.best
        if best is None:
            self.best = child
            if self.kids is not None:
                self.kids[child.token] = child
            return
        if self.kids is None:
            self.kids = {best.token: best}
        self.kids[child.token] = child
        if self.order is None:  # the order starts when the second child comes
            self.order = Order(best)
        self.order.join(child, front=False)

    def raise_count(self, child: Node) -> None:
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

    def lower_count(self, child: Node) -> None:
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

    def drop_child(self, child: Node) -> None:
        """The child leaves with its subtree (its count reached 0)."""
        kids = self.kids
        if kids is not None:
            del kids[child.token]
        order = self.order
        if order is None:
            self.best = None
            return
        order.leave(child)
        assert kids is not None
        if len(kids) == 1:
            self.order = None
            self.best = next(iter(kids.values()))
        else:
            self.best = order.head()
