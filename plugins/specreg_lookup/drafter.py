"""The drafters an ngram or suffix plan hands out: `NgramDrafter` (batched prompt lookup) and
`SuffixDrafter` (suffix trees per request and over earlier responses).

Both satisfy `specreg.protocols.ChainDrafterProtocol`: `propose(history [b, W], lengths [b])`
returns int64 [b, gamma] (gamma = num_steps), the request's proposals followed by its last
token as filler, which a fixed-width verify may run and never needs. What was really proposed:
`lookup(...)` / `speculate(...)` (counts per request; none on no match, as vLLM proposes none),
`propose_lists(...)` (vLLM's list-of-lists) and `propose_tree(...)` (a `LookupTree` of
num_steps + 1 slots for the tree verifier).
"""

from __future__ import annotations

import heapq
from collections.abc import Hashable, Sequence

import attrs
import torch

from specreg.call_keywords import checked_keywords
from specreg.memory import PER_REQUEST, Buffer
from specreg_lookup.kernels.match_tree import LookupTree, build_tree
from specreg_lookup.kernels.ngram_match import ChainProposal, chain_proposals, check_history
from specreg_lookup.runtime import NgramOptions, SuffixOptions


class NgramDrafter:
    """Prompt lookup for a whole batch in a few tensor ops (no loop over tokens or requests).

    Chain proposals follow vLLM 0.33 exactly (`reference.propose_row`); tree proposals merge the
    continuations of the `max_bfs_breadth` best matches breadth-first, as SGLang's NGRAM trie
    offers its most recent (bfs) or most frequent (prob) continuations.
    """

    needs = "token_history"  # specreg.protocols.DRAFTER_NEEDS

    def __init__(self, options: NgramOptions | None = None, *, num_steps: int = 3) -> None:
        self.options = options or NgramOptions()
        self.gamma = int(num_steps)

    @property
    def proposes_trees(self) -> bool:
        """Whether the plan asked for trees (`proposals: "tree"`): `propose_tree` then."""
        return self.options.proposals == "tree"

    @property
    def num_draft_tokens(self) -> int:
        return self.gamma + 1

    def __repr__(self) -> str:
        o = self.options
        return (f"NgramDrafter(min_ngram={o.min_ngram}, max_ngram={o.max_ngram}, "
                f"num_steps={self.gamma}, proposals={o.proposals!r})")

    def memory(self) -> list[Buffer]:
        """Per request: the drafts and their count (the history read is the framework's)."""
        return [Buffer(name="draft_tokens+count", device_bytes=(self.gamma + 1) * 8,
                       per=PER_REQUEST)]

    @checked_keywords
    def lookup(self, history: torch.Tensor, lengths: torch.Tensor, *,
               check_values: bool | None = None) -> ChainProposal:
        o = self.options
        return chain_proposals(history, lengths, min_ngram=o.min_ngram, max_ngram=o.max_ngram,
                               k=self.gamma, check_values=check_values)

    @checked_keywords
    def propose(
        self, history: torch.Tensor, lengths: torch.Tensor, *, draft_lengths: object = None
    ) -> torch.Tensor:
        """[b, gamma] drafts; with `draft_lengths` [b] request r proposes at most
        draft_lengths[r] (0: none), its last token filling the rest."""
        return _cut(self.lookup(history, lengths).tokens, history, lengths, draft_lengths)

    def propose_lists(self, history: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
        return self.lookup(history, lengths).as_lists()

    @checked_keywords
    def propose_tree(
        self, history: torch.Tensor, lengths: torch.Tensor, *, draft_lengths: object = None
    ) -> LookupTree:
        """The trees; with `draft_lengths` [b] request r keeps nodes at depth <= its length."""
        o = self.options
        return build_tree(history, lengths, min_ngram=o.min_ngram, max_ngram=o.max_ngram,
                          breadth=o.max_bfs_breadth, num_nodes=self.gamma + 1,
                          match_type=o.match_type).cut(draft_lengths)


# ------------------------------------------------------------------------------ suffix trees
class _Node:
    """One trie node: how many inserted suffixes pass through it, its children by token, and
    the child with the largest count (ties: the one that reached it first)."""

    __slots__ = ("count", "children", "best", "token")

    def __init__(self, token: int) -> None:
        self.token = token
        self.count = 0
        self.children: dict[int, _Node] = {}
        self.best: _Node | None = None


class SuffixTree:
    """Every suffix of its sequences, cut at `max_depth` tokens, with occurrence counts.

    `extend(seq_id, tokens)` appends to a sequence in O(max_depth) per token; `remove(seq_id)`
    takes a sequence out again. `match(context)` walks the last tokens of a context down
    from the root, `speculate(...)` is arctic-inference's rule.
    """

    def __init__(self, max_depth: int) -> None:
        self.max_depth = max_depth
        self.root = _Node(-1)
        self._seqs: dict[int, list[int]] = {}
        self._active: dict[int, list[_Node]] = {}  # nodes of the suffixes still growing

    def __contains__(self, seq_id: int) -> bool:
        return seq_id in self._seqs

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
                    child = children[token] = _Node(token)
                count = child.count = child.count + 1
                best = parent.best
                if best is None or count > best.count:
                    parent.best = child
                active[i] = child  # active[i] is now the suffix of length i + 1
            if len(active) >= depth:
                active.pop()  # the suffix that reached max_depth tokens stops growing
            root.count += 1

    def remove(self, seq_id: int) -> None:
        seq = self._seqs.pop(seq_id)
        self._active.pop(seq_id, None)
        for start in range(len(seq)):
            node = self.root
            node.count -= 1
            for token in seq[start : start + self.max_depth]:
                child = node.children[token]
                child.count -= 1
                if child.count == 0:
                    del node.children[token]
                    node.best = max(node.children.values(), key=lambda c: c.count, default=None)
                    break
                if node.best is child:
                    node.best = max(node.children.values(), key=lambda c: c.count)
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
                  max_spec_offset: float, min_token_prob: float, tree: bool,
                  seq_id: int | None = None) -> tuple[list[int], list[int], float, int]:
        """(tokens, parents, score, match_len): arctic-inference's SuffixTree::speculate."""
        best: tuple[list[int], list[int], float, int] = ([], [], 0.0, 0)
        nodes = self.match(context, seq_id)
        walk = _walk_tree if tree else _walk_path
        for m, node in enumerate(nodes, start=1):
            if node is None:
                break
            limit = max(0, min(max_spec_tokens, int(m * max_spec_factor + max_spec_offset + 1e-6)))
            longer = nodes[m] if m < len(nodes) else None
            if longer is not None and longer.count == node.count and limit < self.max_depth - m:
                # every occurrence of this match extends to the longer one, whose subtree is this
                # one's (to the depth the walk reaches): its draft is this one's, with a limit at
                # least as large, and a tie goes to the longer match anyway
                continue
            tokens, parents, score = walk(node, limit, min_token_prob)
            if score >= best[2]:
                best = (tokens, parents, score, m)
        return best


def _walk_path(node: _Node, limit: int, min_prob: float) -> tuple[list[int], list[int], float]:
    tokens: list[int] = []
    prob, score = 1.0, 0.0
    while len(tokens) < limit:
        child = node.best
        if child is None:
            break
        prob *= child.count / node.count
        if prob < min_prob:
            break
        tokens.append(child.token)
        score += prob
        node = child
    return tokens, list(range(-1, len(tokens) - 1)), score


def _walk_tree(node: _Node, limit: int, min_prob: float) -> tuple[list[int], list[int], float]:
    """The most probable nodes first (arctic's priority queue), each at least min_prob."""
    tokens: list[int] = []
    parents: list[int] = []
    score = 0.0
    heap: list[tuple[float, int, _Node, int]] = []
    order = 0

    def push(parent_node: _Node, parent_slot: int, prob: float) -> None:
        nonlocal order
        for child in sorted(parent_node.children.values(), key=lambda c: -c.count):
            p = prob * child.count / parent_node.count
            if p < min_prob:
                break
            heapq.heappush(heap, (-p, order, child, parent_slot))
            order += 1

    push(node, -1, 1.0)
    while heap and len(tokens) < limit:
        neg, _, child, parent_slot = heapq.heappop(heap)
        tokens.append(child.token)
        parents.append(parent_slot)
        score += -neg
        push(child, len(tokens) - 1, -neg)
    return tokens, parents, score


@attrs.frozen(kw_only=True)
class SuffixDraft:
    """One request's speculation: tokens, parents (-1: the root), score, match length."""

    tokens: list[int]
    parents: list[int]
    score: float
    match_len: int


class SuffixDrafter:
    """Suffix decoding: a suffix tree per active request (its prompt and output so far) and one
    global tree over responses (the last `max_cached_requests`, FIFO), drafting the best-scored
    continuation of the longest useful match in either; the length follows the match.

    Framework API (vLLM's, arctic-inference's): `start_request(req_id, prompt)`,
    `add_active_response(req_id, tokens)`, `speculate(req_id, context)`,
    `stop_request(req_id)`. The plan's `propose(history, lengths)` keys requests by batch row:
    a row whose history no longer extends what it held is a new request (the old one stops,
    its response staying in the global tree).
    """

    needs = "token_history"  # specreg.protocols.DRAFTER_NEEDS

    def __init__(self, options: SuffixOptions | None = None, *, num_steps: int | None = None
                 ) -> None:
        self.options = options or SuffixOptions()
        self.gamma = int(num_steps if num_steps is not None else self.options.max_tree_depth)
        self._global = SuffixTree(self.options.max_tree_depth)
        self._local: dict[Hashable, SuffixTree] = {}
        self._seq_of: dict[Hashable, int] = {}  # requests whose response the global tree holds
        self._next_seq = 0
        self._rows: dict[int, tuple[Hashable, int, int]] = {}  # row -> (req, length, first token)
        self._epoch = 0

    @property
    def proposes_trees(self) -> bool:
        """Whether the plan asked for trees (`proposals: "tree"`): `propose_tree` then."""
        return self.options.proposals == "tree"

    @property
    def num_draft_tokens(self) -> int:
        return self.gamma + 1

    def __repr__(self) -> str:
        o = self.options
        return (f"SuffixDrafter(max_tree_depth={o.max_tree_depth}, max_spec_factor="
                f"{o.max_spec_factor}, min_token_prob={o.min_token_prob}, num_steps={self.gamma})")

    def memory(self) -> list[Buffer]:
        """Per request: the drafts and their count on the device (the trees live on the host)."""
        return [Buffer(name="draft_tokens+count", device_bytes=(self.gamma + 1) * 8,
                       per=PER_REQUEST)]

    # --------------------------------------------------------------------- the framework API
    @property
    def active_requests(self) -> set[Hashable]:
        return set(self._local)

    def start_request(self, req_id: Hashable, prompt: Sequence[int]) -> None:
        if req_id in self._local:
            raise ValueError(f"request {req_id!r} is already active")
        tree = self._local[req_id] = SuffixTree(self.options.max_tree_depth)
        tree.extend(0, list(prompt))
        cached = self.options.max_cached_requests
        if cached == 0:
            return
        if req_id in self._seq_of:
            self._global.remove(self._seq_of.pop(req_id))
        self._seq_of[req_id] = self._next_seq
        self._next_seq += 1
        while cached > 0 and len(self._seq_of) > cached:
            oldest = next(iter(self._seq_of))
            self._global.remove(self._seq_of.pop(oldest))

    def add_active_response(self, req_id: Hashable, tokens: Sequence[int]) -> None:
        tokens = list(tokens)
        self._local[req_id].extend(0, tokens)
        seq = self._seq_of.get(req_id)
        if seq is not None:
            self._global.extend(seq, tokens)

    def stop_request(self, req_id: Hashable) -> None:
        del self._local[req_id]

    def speculate(self, req_id: Hashable, context: Sequence[int],
                  max_spec_tokens: int | None = None) -> SuffixDraft:
        o = self.options
        limit = self.gamma if max_spec_tokens is None else max_spec_tokens
        context = list(context)[-o.max_tree_depth :]
        tree = o.proposals == "tree"
        args = (limit, o.max_spec_factor, o.max_spec_offset, o.min_token_prob, tree)
        local = self._local[req_id].speculate(context, *args, seq_id=0)
        seq = self._seq_of.get(req_id)
        other = self._global.speculate(context, *args, seq_id=seq) if self._seq_of else (
            [], [], 0.0, 0)
        best = local if local[2] >= other[2] else other
        return SuffixDraft(tokens=best[0], parents=best[1], score=best[2], match_len=best[3])

    # ------------------------------------------------------------------ the plan's protocol
    def _sync(self, history: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
        """Bring each row's request up to date; returns each row's context (its last
        max_tree_depth tokens). Reads only each row's tail, not the whole history."""
        history, lengths = check_history(history, lengths)
        depth = self.options.max_tree_depth
        span = min(history.shape[1], depth + self.gamma + 1)  # a step adds <= gamma + 1 tokens
        index = (lengths[:, None] - span + torch.arange(span, device=history.device)).clamp(min=0)
        tails = history.gather(1, index).tolist()
        firsts = history[:, 0].tolist()
        contexts = []
        for r, (tail, length, first) in enumerate(zip(tails, lengths.tolist(), firsts,
                                                      strict=True)):
            seen = self._rows.get(r)
            if seen is not None and (length < seen[1] or first != seen[2]
                                     or length - seen[1] > span):
                self.stop_request(seen[0])
                seen = None
            if seen is None:
                req: Hashable = (self._epoch, r)
                self._epoch += 1
                self.start_request(req, history[r, :length].tolist())
            else:
                req = seen[0]
                if length > seen[1]:
                    self.add_active_response(req, tail[span - (length - seen[1]) :])
            self._rows[r] = (req, length, first)
            contexts.append(tail[max(0, span - min(length, depth)) :])
        return contexts

    def speculate_rows(self, history: torch.Tensor, lengths: torch.Tensor) -> list[SuffixDraft]:
        """One `SuffixDraft` per row, after feeding each row's new tokens to its trees."""
        contexts = self._sync(history, lengths)
        return [self.speculate(self._rows[r][0], ctx) for r, ctx in enumerate(contexts)]

    def propose_lists(self, history: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
        return [d.tokens for d in self.speculate_rows(history, lengths)]

    @checked_keywords
    def propose(
        self, history: torch.Tensor, lengths: torch.Tensor, *, draft_lengths: object = None
    ) -> torch.Tensor:
        """[b, gamma] drafts, the last token filling; at most draft_lengths[r] per request."""
        if draft_lengths is not None:
            return _cut(self.propose(history, lengths), history, lengths, draft_lengths)
        drafts = self.speculate_rows(history, lengths)
        last = history.gather(1, (lengths.long() - 1)[:, None])[:, 0].tolist()
        if self.options.proposals == "chain":
            rows = [d.tokens[: self.gamma] + [t] * (self.gamma - len(d.tokens[: self.gamma]))
                    for d, t in zip(drafts, last, strict=True)]
        else:
            rows = [_chain_of(d, self.gamma, t) for d, t in zip(drafts, last, strict=True)]
        return torch.tensor(rows, dtype=torch.long, device=history.device).reshape(-1, self.gamma)

    @checked_keywords
    def propose_tree(
        self, history: torch.Tensor, lengths: torch.Tensor, *, draft_lengths: object = None
    ) -> LookupTree:
        """The drafts as a `LookupTree` of num_steps + 1 slots (a chain is a one-branch tree);
        with `draft_lengths` [b] request r keeps nodes at depth <= its length."""
        if draft_lengths is not None:
            return self.propose_tree(history, lengths).cut(draft_lengths)
        drafts = self.speculate_rows(history, lengths)
        n = self.gamma + 1
        device = history.device
        last = history.gather(1, (lengths.long() - 1)[:, None])[:, 0].tolist()
        tokens, parents, valid, depth = [], [], [], []
        for d, root in zip(drafts, last, strict=False):
            k = min(len(d.tokens), n - 1)
            par = [p + 1 for p in d.parents[:k]]  # slot 0 is the root
            dep = [0]
            for p in par:
                dep.append(dep[p] + 1)
            tokens.append([root, *d.tokens[:k]] + [root] * (n - 1 - k))
            parents.append([-1, *par] + [0] * (n - 1 - k))
            valid.append([True] * (k + 1) + [False] * (n - 1 - k))
            depth.append(dep + [0] * (n - 1 - k))
        as_tensor = lambda x, dt: torch.tensor(x, dtype=dt, device=device)  # noqa: E731
        return LookupTree(
            tokens=as_tensor(tokens, torch.long), parents=as_tensor(parents, torch.long),
            valid=as_tensor(valid, torch.bool), depth=as_tensor(depth, torch.long),
        )


def _chain_of(draft: SuffixDraft, gamma: int, filler: int) -> list[int]:
    """The first branch of a tree draft (its slots in order while each extends the previous)."""
    chain: list[int] = []
    for token, parent in zip(draft.tokens, draft.parents, strict=False):
        if parent == len(chain) - 1 and len(chain) < gamma:
            chain.append(token)
    return chain + [filler] * (gamma - len(chain))


def _cut(drafts: torch.Tensor, history: torch.Tensor, lengths: torch.Tensor,
         draft_lengths: object) -> torch.Tensor:
    """`drafts` [b, gamma] with positions at or past draft_lengths[r] holding the request's
    last token (`specreg.draft_lengths.cut_chain`); `drafts` without lengths."""
    if draft_lengths is None:
        return drafts
    from specreg.draft_lengths import check_draft_lengths, cut_chain

    b, gamma = drafts.shape
    capped = check_draft_lengths(draft_lengths, b, gamma, device=drafts.device,
                                 what=f"a chain of {gamma} drafts")
    last = history.gather(1, (lengths.long() - 1)[:, None])[:, 0]
    return cut_chain(drafts, capped, last)
