"""The drafters an ngram or suffix plan hands out: `NgramDrafter` (batched prompt lookup) and
`SuffixDrafter` (suffix trees per request and over earlier responses).

Both satisfy `specreg.contract.protocols.ChainDrafterProtocol`: `propose(history [b, W], lengths [b])`
returns int64 [b, gamma] (gamma = num_steps), the request's proposals followed by its last
token as filler, which a fixed-width verify may run and never needs. What was really proposed:
`lookup(...)` / `speculate(...)` (counts per request; none on no match, as vLLM proposes none),
`propose_lists(...)` (vLLM's list-of-lists) and `propose_tree(...)` (a `LookupTree` of
num_steps + 1 slots for the tree verifier).
"""

from __future__ import annotations

from collections.abc import Hashable, Sequence

import attrs
import torch

from specreg.step.call_keywords import checked_keywords
from specreg.contract.memory import PER_REQUEST, Buffer
from specreg_lookup.errors import request_state_error
from specreg_lookup.kernels.match_tree import LookupTree, build_tree
from specreg_lookup.kernels.ngram_match import ChainProposal, chain_proposals, check_history
from specreg_lookup.sizes import NgramOptions, SuffixOptions
from specreg_lookup.suffix_tree import SuffixTree, exact_probability

__all__ = ["NgramDrafter", "SuffixDraft", "SuffixDrafter", "SuffixTree"]


class NgramDrafter:
    """Prompt lookup for a whole batch in a few tensor ops (no loop over tokens or requests).

    Chain proposals follow vLLM 0.33 exactly (`reference.propose_row`); tree proposals merge the
    continuations of the `max_bfs_breadth` best matches breadth-first, as SGLang's NGRAM trie
    offers its most recent (bfs) or most frequent (prob) continuations. `backend` picks the
    chain proposals' kernel (`ngram_match.chain_proposals`): None reads SPECREG_KERNEL_BACKEND,
    'auto' runs the compiled CPU path where numba imports, 'torch' the torch path.
    """

    needs = "token_history"  # specreg.contract.protocols.DRAFTER_NEEDS
    #: specreg.contract.protocols.reads_within_lengths: chain proposals (both kernel paths)
    #: depend on each row's first lengths[r] tokens alone, int32 or int64 (vLLM's rows, no copy)
    reads_within_lengths = True

    def __init__(self, options: NgramOptions | None = None, *, num_steps: int = 3,
                 backend: str | None = None) -> None:
        self.options = options or NgramOptions()
        self.gamma = int(num_steps)
        self.backend = backend

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
                               k=self.gamma, check_values=check_values, backend=self.backend)

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
@attrs.frozen(kw_only=True)
class SuffixDraft:
    """One request's speculation: tokens, parents (-1: the root), score (the sum of the drafted
    tokens' estimated probabilities), match length."""

    tokens: list[int]
    parents: list[int]
    score: float
    match_len: int


class SuffixDrafter:
    """Suffix decoding: a suffix tree per active request (its prompt and output so far) and one
    global tree over responses (the last `max_cached_requests`, FIFO), drafting the best-scored
    continuation of the longest useful match in either; the length follows the match. The
    trees are `specreg_lookup.suffix_tree`'s: arctic-inference's rule, ties decided exactly.

    Framework API (arctic-inference's `SuffixDecodingCache`, which vLLM's suffix proposer
    drives): `start_request(req_id, prompt)`, `add_active_response(req_id, tokens)`,
    `speculate(req_id, context, max_spec_tokens)`, `stop_request(req_id)`,
    `active_requests`; an id that is not active (or, to start, one that is) raises SR495, a
    ValueError. vLLM's custom_class proposer (`specreg.adapters.vllm_proposers`) drives it
    through these with request ids told from the rows' tokens.

    The plan's `propose(history, lengths)` keys requests by batch row: a row continues the
    request it held when every token that request had is still the row's prefix, otherwise it
    holds a new request (the old one stops, its response staying in the global tree) whose
    prompt is the whole row (these calls do not say which tokens were just sampled).
    """

    needs = "token_history"  # specreg.contract.protocols.DRAFTER_NEEDS

    def __init__(self, options: SuffixOptions | None = None, *, num_steps: int | None = None
                 ) -> None:
        self.options = options or SuffixOptions()
        self.gamma = int(num_steps if num_steps is not None else self.options.max_tree_depth)
        self._global = SuffixTree(self.options.max_tree_depth)
        self._local: dict[Hashable, SuffixTree] = {}
        self._seq_of: dict[Hashable, int] = {}  # requests whose response the global tree holds
        self._next_seq = 0
        self._rows: dict[int, Hashable] = {}  # batch row -> the request it held (the plan's path)
        self._epoch = 0
        o = self.options
        prob = exact_probability(o.min_token_prob)
        self._rule = (o.max_tree_depth, o.max_spec_factor, o.max_spec_offset,
                      (prob.numerator, prob.denominator), o.proposals == "tree")

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

    @property
    def cached_requests(self) -> set[Hashable]:
        """Requests whose response the global tree holds (arctic's `cached_requests`)."""
        return set(self._seq_of)

    def _tree_of(self, req_id: Hashable, call: str) -> SuffixTree:
        tree = self._local.get(req_id)
        if tree is None:
            raise request_state_error(req_id, active=False, call=call)
        return tree

    def start_request(self, req_id: Hashable, prompt: Sequence[int]) -> None:
        """Opens `req_id` with its prompt, and a new response slot in the global tree (the
        oldest cached response leaves it beyond `max_cached_requests`)."""
        if req_id in self._local:
            raise request_state_error(req_id, active=True, call="start_request")
        tree = self._local[req_id] = SuffixTree(self.options.max_tree_depth)
        tree.extend(0, [int(t) for t in prompt])
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
        """Appends `tokens` to the request's text and, while cached, to its global response."""
        tokens = [int(t) for t in tokens]
        self._tree_of(req_id, "add_active_response").extend(0, tokens)
        seq = self._seq_of.get(req_id)
        if seq is not None:
            self._global.extend(seq, tokens)

    def stop_request(self, req_id: Hashable) -> None:
        """Closes `req_id`; its response stays in the global tree until evicted."""
        self._tree_of(req_id, "stop_request")
        del self._local[req_id]

    def speculate(self, req_id: Hashable, context: Sequence[int],
                  max_spec_tokens: int | None = None) -> SuffixDraft:
        """The best draft for `context` (its last max_tree_depth tokens) from the request's own
        tree and the global one, the request's own winning a tie; at most `max_spec_tokens`
        tokens (default: num_steps)."""
        tree = self._local.get(req_id)
        if tree is None:
            raise request_state_error(req_id, active=False, call="speculate")
        limit = self.gamma if max_spec_tokens is None else int(max_spec_tokens)
        depth, factor, offset, floor, as_tree = self._rule
        tail = context[-depth:]
        context = tail if type(tail) is list else (
            tail.tolist() if hasattr(tail, "tolist") else list(tail))
        local = tree.best(context, limit, factor, offset, floor, as_tree, 0)
        other = self._global.best(context, limit, factor, offset, floor, as_tree,
                                  self._seq_of.get(req_id))  # (tokens, parents, total, base, m)
        best = local if local[2] * other[3] >= other[2] * local[3] else other  # exact scores
        return SuffixDraft(tokens=best[0], parents=best[1], score=best[2] / best[3],
                           match_len=best[4])

    # ------------------------------------------------------------------ the plan's protocol
    def _sync(self, history: torch.Tensor, lengths: torch.Tensor) -> list[list[int]]:
        """Bring each row's request up to date; returns each row's context (its last
        max_tree_depth tokens). A row continues its request only if all of that request's
        tokens are still the row's prefix (read in full: a new request may share any prefix)."""
        history, lengths = check_history(history, lengths)
        depth = self.options.max_tree_depth
        for r in [r for r in self._rows if r >= history.shape[0]]:  # the batch shrank
            self.stop_request(self._rows.pop(r))
        contexts = []
        for r, length in enumerate(lengths.tolist()):
            row = history[r, :length].tolist()
            req = self._rows.get(r)
            known = self._local[req].tokens(0) if req in self._local else None
            if known is not None and (len(known) > length or row[: len(known)] != known):
                self.stop_request(req)
                known = None
            if known is None:
                req = (self._epoch, r)
                self._epoch += 1
                self.start_request(req, row)
                self._rows[r] = req
            elif length > len(known):
                self.add_active_response(req, row[len(known) :])
            contexts.append(row[max(0, length - depth) :])
        return contexts

    def speculate_rows(self, history: torch.Tensor, lengths: torch.Tensor) -> list[SuffixDraft]:
        """One `SuffixDraft` per row, after feeding each row's new tokens to its trees."""
        contexts = self._sync(history, lengths)
        return [self.speculate(self._rows[r], ctx) for r, ctx in enumerate(contexts)]

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
    last token (`specreg.step.draft_lengths.cut_chain`); `drafts` without lengths."""
    if draft_lengths is None:
        return drafts
    from specreg.kernels.checks import check_draft_lengths
    from specreg.step.draft_lengths import cut_chain

    b, gamma = drafts.shape
    capped = check_draft_lengths(draft_lengths, b, gamma, device=drafts.device,
                                 what=f"a chain of {gamma} drafts")
    last = history.gather(1, (lengths.long() - 1)[:, None])[:, 0]
    return cut_chain(drafts, capped, last)
