"""arctic-inference's suffix speculation told again over specreg's trees, in either arithmetic:
arctic's float32 (`SuffixTree::speculate`, `_speculate_path`, `_speculate_tree` in
csrc/suffix_decoding/suffix_tree.cc of arctic-inference 0.3.0, and `SuffixDecodingCache.speculate`)
or exact, as specreg decides. Every comparison is made in both and, where the two disagree, logged
with whether the exact values were equal.

This is how the tests tell a float32 tie from a real difference. Where specreg's draft differs
from the one arctic-inference gave, on the same trees (specreg's node counts and sibling order):

- the float32 rule must give arctic's draft, bit for bit (its score too), so the trees are
  arctic's and only the arithmetic differs;
- the exact rule must give specreg's draft;
- every comparison where the two arithmetics went different ways must be an exact tie (two
  equal probabilities in the heap, a probability exactly `min_token_prob`, two match lengths
  or the two trees with equal scores) that arctic's float32 products and sums rounded apart.

The walk follows the uncompressed trie: a token inside one of arctic's compressed nodes is a
node whose only child has its count (a ratio of 1, exact in float32 too), and a heap item ends
a node where a suffix ends or the path branches (`specreg_lookup.suffix_tree._after`). The heap
is libstdc++'s `std::priority_queue`, run with the chosen arithmetic's comparisons. Slow
(Fractions, one Python call per comparison): the tests run it on the calls that differ and on a
sample of the others.
"""

from __future__ import annotations

import struct
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from fractions import Fraction
from typing import Any


def f32(x: float) -> float:
    """x rounded to float32 (one float32 operation is its float64 result rounded once)."""
    return struct.unpack("f", struct.pack("f", x))[0]


@dataclass
class Log:
    """The comparisons where float32 and exact arithmetic disagree: (kind, exactly equal)."""

    entries: list[tuple[str, bool]] = field(default_factory=list)

    def decide(self, kind: str, use_f32: bool, by_f32: bool, by_exact: bool,
               exact_equal: bool) -> bool:
        if by_f32 != by_exact:
            self.entries.append((kind, exact_equal))
        return by_f32 if use_f32 else by_exact


@dataclass(frozen=True)
class Walked:
    """One draft: its tokens and parents, its score as float32 and exactly (total / base)."""

    tokens: list[int]
    parents: list[int]
    score32: float
    total: int
    base: int
    match_len: int = 0


@dataclass(frozen=True)
class Rule:
    """The call's options; `min_token_prob` exactly as the decimal it was written as."""

    max_spec_tokens: int
    max_spec_factor: float
    max_spec_offset: float
    min_token_prob: float
    tree: bool

    @property
    def floor(self) -> Fraction:
        return Fraction(repr(float(self.min_token_prob)))


def _children(node: Any) -> list[Any]:
    return node.ordered_children() if node.children else []


def _path(node: Any, limit: int, rule: Rule, use_f32: bool, log: Log) -> Walked:
    base, floor, min32 = node.count, rule.floor, f32(rule.min_token_prob)
    tokens: list[int] = []
    prob, score, total = 1.0, 0.0, 0
    while len(tokens) < limit:
        children = _children(node)
        if not children:
            break
        child = children[0]
        prob = f32(prob * f32(child.count / node.count))
        exact = Fraction(child.count, base)
        if not log.decide("threshold", use_f32, prob >= min32, exact >= floor, exact == floor):
            break
        node = child
        tokens.append(node.token)
        score = f32(score + prob)
        total += node.count
    return Walked(tokens, list(range(-1, len(tokens) - 1)), score, total, base)


@dataclass
class _Item:
    prob: float  # float32
    count: int  # exact: the probability is count / base
    node: Any
    parent: int
    expand: bool


def _tree(node: Any, limit: int, rule: Rule, use_f32: bool, log: Log) -> Walked:
    base, floor, min32 = node.count, rule.floor, f32(rule.min_token_prob)

    def less(a: _Item, b: _Item) -> bool:
        return log.decide("heap", use_f32, a.prob < b.prob, a.count < b.count,
                          a.count == b.count)

    def after(at: Any, prob: float, count: int, slot: int) -> _Item:
        if len(at.children) == 1:
            (only,) = at.children.values()
            if only.count == at.count:
                return _Item(prob, count, only, slot, False)
        return _Item(prob, count, at, slot, True)

    heap: list[_Item] = []
    _push(heap, after(node, 1.0, base, -1), less)
    tokens: list[int] = []
    parents: list[int] = []
    score, total = 0.0, 0
    while heap and len(tokens) < limit:
        it = _pop(heap, less)
        if not it.expand:
            tokens.append(it.node.token)
            parents.append(it.parent)
            score = f32(score + it.prob)
            total += it.count
            _push(heap, after(it.node, it.prob, it.count, len(tokens) - 1), less)
            continue
        for child in _children(it.node):
            prob = f32(f32(it.prob * float(child.count)) / float(it.node.count))
            exact = Fraction(child.count, base)
            if log.decide("threshold", use_f32, prob < min32, exact < floor, exact == floor):
                break
            _push(heap, _Item(prob, child.count, child, it.parent, False), less)
    return Walked(tokens, parents, score, total, base)


def _push(heap: list, item: Any, less: Callable[[Any, Any], bool]) -> None:
    heap.append(item)
    _sift_up(heap, len(heap) - 1, item, less)


def _sift_up(heap: list, hole: int, item: Any, less: Callable[[Any, Any], bool]) -> None:
    parent = (hole - 1) // 2
    while hole > 0 and less(heap[parent], item):
        heap[hole] = heap[parent]
        hole = parent
        parent = (hole - 1) // 2
    heap[hole] = item


def _pop(heap: list, less: Callable[[Any, Any], bool]) -> Any:
    """libstdc++'s pop_heap: the hole goes down to a leaf, the last item sifts up from it."""
    top = heap[0]
    last = heap.pop()
    size = len(heap)
    if size:
        hole = second = 0
        while second < (size - 1) // 2:
            second = 2 * (second + 1)
            if less(heap[second], heap[second - 1]):
                second -= 1
            heap[hole] = heap[second]
            hole = second
        if size % 2 == 0 and second == (size - 2) // 2:
            second = 2 * (second + 1)
            heap[hole] = heap[second - 1]
            hole = second - 1
        _sift_up(heap, hole, last, less)
    return top


def _at_least(a: Walked, b: Walked, kind: str, use_f32: bool, log: Log) -> bool:
    """a.score >= b.score in the chosen arithmetic."""
    left, right = a.total * b.base, b.total * a.base
    return log.decide(kind, use_f32, a.score32 >= b.score32, left >= right, left == right)


def speculate_tree(tree: Any, context: Sequence[int], rule: Rule, use_f32: bool,
                   log: Log) -> Walked:
    """SuffixTree::speculate: every match length m, the best score, a tie to the longer."""
    best = Walked([], [], 0.0, 0, 1)
    walk = _tree if rule.tree else _path
    for m, node in enumerate(tree.match(list(context)), start=1):
        if node is None:
            break
        limit = int(f32(f32(m * f32(rule.max_spec_factor)) + f32(rule.max_spec_offset)) + 1e-6)
        limit = max(min(rule.max_spec_tokens, limit), 0)
        draft = walk(node, limit, rule, use_f32, log)
        if _at_least(draft, best, "match", use_f32, log):
            best = Walked(draft.tokens, draft.parents, draft.score32, draft.total, draft.base, m)
    return best


def speculate(local: Any, global_: Any, context: Sequence[int], rule: Rule, *,
              use_f32: bool) -> tuple[Walked, Log]:
    """SuffixDecodingCache.speculate over a request's tree and the global one (the request's
    wins a tie), and the log of the comparisons the two arithmetics decide differently."""
    log = Log()
    mine = speculate_tree(local, context, rule, use_f32, log)
    other = speculate_tree(global_, context, rule, use_f32, log)
    return (mine if _at_least(mine, other, "source", use_f32, log) else other), log


# ------------------------------------------------------------------ comparing with arctic's drafts
def rule_of(options: Any, k: int, tree: bool) -> Rule:
    return Rule(max_spec_tokens=k, max_spec_factor=options.max_spec_factor,
                max_spec_offset=options.max_spec_offset,
                min_token_prob=options.min_token_prob, tree=tree)


def check_call(drafter: Any, req: Any, context: Sequence[int], rule: Rule, record: Sequence[Any],
               *, retell: bool) -> tuple[Any, frozenset[str] | None]:
    """specreg's draft for one call beside arctic's `record` ([token ids, parents, float32
    score, match length]): (specreg's draft, None) where they are equal, (draft, the kinds of
    comparison float32 rounded apart) where the difference is a float32 tie; anything else
    fails. `retell`: run the two rules on this call even where the drafts are equal."""
    tokens, parents, score, match_len = record
    mine = drafter.speculate(req, context)
    same = (mine.tokens, mine.parents, mine.match_len) == (tokens, parents, match_len)
    if same:
        assert abs(mine.score - score) <= 1e-5 * max(1.0, score), (mine, record)
        if not retell:
            return mine, None
    local, global_ = drafter._local[req], drafter._global
    as_f32, log32 = speculate(local, global_, context, rule, use_f32=True)
    exact, log = speculate(local, global_, context, rule, use_f32=False)
    assert (as_f32.tokens, as_f32.parents, as_f32.match_len, as_f32.score32) == (
        tokens, parents, match_len, f32(score)), (
        "arctic's rule in float32 over specreg's trees does not give arctic's draft: the trees "
        f"differ (counts or sibling order), not the arithmetic: {as_f32} vs {record}")
    assert (exact.tokens, exact.parents, exact.match_len) == (
        mine.tokens, mine.parents, mine.match_len), (
        f"arctic's rule in exact arithmetic does not give specreg's draft: {exact} vs {mine}")
    assert exact.total / exact.base == mine.score, (exact, mine)
    if same:
        return mine, None
    rounded = log32.entries + log.entries
    assert rounded and all(equal for _, equal in rounded), (
        f"not a float32 tie: float32 and exact arithmetic part at {rounded}; specreg {mine}, "
        f"arctic {record}")
    return mine, frozenset(kind for kind, _ in rounded)


def compare_random_case(case: dict[str, Any], mode: str, *, every: int
                        ) -> dict[int, frozenset[str]]:
    """Replays one committed random case ([prompt, output] requests, one speculation per
    output token) on a fresh SuffixDrafter: call index -> kinds of each float32 tie; any other
    difference fails. Both rules are told again on every `every`-th call."""
    from specreg_lookup.drafter import SuffixDrafter
    from specreg_lookup.sizes import SuffixOptions

    from tests.support.suffix_replay import replay_tokens

    o = case["options"]
    drafter = SuffixDrafter(SuffixOptions(
        max_tree_depth=o["max_tree_depth"], max_cached_requests=o["max_cached_requests"],
        max_spec_factor=o["max_spec_factor"], min_token_prob=o["min_token_prob"],
        proposals=mode), num_steps=o["k"])
    rule = rule_of(drafter.options, o["k"], mode == "tree")
    calls = case[mode]["calls"]
    ties: dict[int, frozenset[str]] = {}
    done = 0

    def speculate(req: Any, context: list[int]) -> tuple[None, None]:
        nonlocal done
        _, tie = check_call(drafter, req, context, rule, calls[done], retell=done % every == 0)
        if tie:
            ties[done] = tie
        done += 1
        return None, None

    replay_tokens(drafter, speculate, case["requests"], o["max_tree_depth"])
    assert done == len(calls), "the case no longer makes the recorded calls"
    return ties
