"""The per-step contract: what a plan's verifier, drafter and cache swapper must offer.

A serving loop drives `plan.drafter`, `plan.verifier` and `plan.cache_swapper` through these
`typing.Protocol`s only, whatever plugin built them. `registry.resolve` checks every object a
plugin returns against the protocol its algorithm's drafting style calls for, and reports a
breach as SR123 naming the plugin. Every verifier returns one result type, `VerifyResult`.
Imports neither torch nor triton (tensors are annotated as strings).
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol, runtime_checkable

import attrs

if TYPE_CHECKING:
    import torch


@attrs.frozen(kw_only=True)
class VerifyResult:
    """What every verifier returns for b requests (D = the deepest path + 1 slots).

    - `num_accepted` int32 [b]: drafts accepted, not counting the bonus.
    - `output_tokens` int64 [b, D]: the accepted drafts, then the bonus, then -1: the emitted
      tokens (`num_accepted + 1` per request).
    - `bonus` int64 [b]: the token emitted after the accepted drafts (the next step's root).
    - `accepted_index` int64 [b, D]: the flat row (request * width + node) of the root and of
      each accepted node, root first, -1 padded: the rows whose KV and hidden states to keep.
    - `predicts` int64 [b * width] or None: for tree verifiers, the token emitted after each
      node on the accepted path, -1 elsewhere.
    - `param_error` bool [b] or None: with per-request sampling parameters and value checks off
      (the GPU path), the requests whose parameters were invalid; they accept nothing and emit -1.
    - `acceptance` str: 'lossless', or the lossy rule (`specreg.contract.acceptance_rules` kind) that
      produced the result; `emitted_logprobs` refuses processed logprobs of a lossy result (SR199).

    `accept_len`, `accept_token_num` and `accept_index` are the older names, kept as aliases.
    """

    num_accepted: torch.Tensor
    output_tokens: torch.Tensor
    bonus: torch.Tensor
    width: int
    _accepted_index: torch.Tensor | None = attrs.field(default=None, alias="accepted_index")
    predicts: torch.Tensor | None = None
    param_error: torch.Tensor | None = None
    acceptance: str = "lossless"

    @property
    def accepted_index(self) -> torch.Tensor:
        """Computed on first use for chains (node i of request r is row r * width + i)."""
        if self._accepted_index is None:
            import torch

            out = self.output_tokens
            b, slots = out.shape
            k = torch.arange(slots, device=out.device).unsqueeze(0)
            rows = torch.arange(b, device=out.device).unsqueeze(1) * self.width
            count = self.num_accepted.to(torch.int64).unsqueeze(1)
            index = torch.where(k <= count, rows + k, torch.full_like(out, -1, dtype=torch.int64))
            object.__setattr__(self, "_accepted_index", index)
        return self._accepted_index  # type: ignore[return-value]

    @property
    def num_emitted(self) -> torch.Tensor:
        """Tokens emitted per request: num_accepted + 1."""
        return self.num_accepted + 1

    @property
    def accepted_by_position(self) -> torch.Tensor:
        """bool [b, D - 1]: whether each request accepted the draft at each position of its
        path (position i is accepted when num_accepted > i). `specreg.step.acceptance_stats` sums these
        over steps without materialising them."""
        import torch

        slots = self.output_tokens.shape[1] - 1
        positions = torch.arange(slots, device=self.num_accepted.device)
        return positions.unsqueeze(0) < self.num_accepted.unsqueeze(1)

    @property
    def accept_len(self) -> torch.Tensor:
        return self.num_accepted

    @property
    def accept_token_num(self) -> torch.Tensor:
        return self.num_accepted

    @property
    def accept_index(self) -> torch.Tensor:
        return self.accepted_index


# ------------------------------------------------------------------------------------ verifiers
@runtime_checkable
class ChainVerifierProtocol(Protocol):
    """Verifies one chain per request: `candidates` int64 [b, n] = the root, then n - 1 drafts.

    `widths` lists every verify width n it accepts (the main config's and each adaptive
    candidate's); `num_draft_tokens` is the largest. `draft_lengths` [b] (`specreg.step.draft_lengths`)
    caps request r at its first draft_lengths[r] drafts; 0 opts it out (one plain sample).
    """

    rules: tuple[str, ...]
    num_draft_tokens: int
    widths: tuple[int, ...]

    def verify_greedy(
        self, candidates: torch.Tensor, target_logits: torch.Tensor, *,
        verify_lens: torch.Tensor | None = None, draft_lengths: Any = None,
    ) -> VerifyResult:
        """Leading match against the target's argmax; `target_logits` [b, n, V]."""

    def verify_sampling(
        self, candidates: torch.Tensor, target_probs: torch.Tensor,
        draft_probs: torch.Tensor | None, *, verify_lens: torch.Tensor | None = None,
        keys: torch.Tensor | None = None, positions: torch.Tensor | None = None,
        generator: torch.Generator | None = None, draft_lengths: Any = None,
    ) -> VerifyResult:
        """Lossless rejection sampling; `target_probs` [b, n, V], `draft_probs` [b, n - 1, V]
        (None: the target-only rule). Draws are keyed by each request's key `keys` [b] and the
        absolute output position `positions` [b] of the token row 0 verifies."""


@runtime_checkable
class TreeVerifierProtocol(Protocol):
    """Verifies one draft tree per request, as a tree drafter assembled it. `draft_lengths`
    [b] (`specreg.step.draft_lengths`) keeps request r to the nodes at depth <= draft_lengths[r]; 0
    opts it out (one plain sample from the root's row)."""

    rules: tuple[str, ...]
    num_draft_tokens: int
    widths: tuple[int, ...]

    def verify_greedy(
        self, tree: Any, target_logits: torch.Tensor | None = None, *, draft_lengths: Any = None,
    ) -> VerifyResult:
        """Longest path matching the target's argmax; `target_logits` [b, N, V]."""

    def verify_sampling(
        self, tree: Any, target_probs: torch.Tensor, *, draft_probs: torch.Tensor | None = None,
        keys: torch.Tensor | None = None, positions: torch.Tensor | None = None,
        generator: torch.Generator | None = None, draft_lengths: Any = None,
    ) -> VerifyResult:
        """Lossless tree sampling; `target_probs` [b, N, V]."""


# ------------------------------------------------------------------------------------- drafters
#: What a drafter drafts from, declared by its `needs` attribute (a class attribute), so that a
#: framework seam handing over less can refuse it when the seam is built, never at a step:
#: "token_history" (the request's token ids alone: n-gram, suffix), "target_hidden_states" (the
#: target model's hidden states or logits: EAGLE, Medusa, DSpark, DFlash) or "draft_model" (a
#: draft model the framework runs). vLLM's custom_class seam hands over token ids only, so its
#: proposer (`specreg.adapters.vllm_proposers`) takes "token_history" drafters alone.
DRAFTER_NEEDS: tuple[str, ...] = ("token_history", "target_hidden_states", "draft_model")
TOKEN_HISTORY = "token_history"


#: A "token_history" drafter whose class sets `reads_within_lengths = True` proposes chains
#: (`propose`, `propose_lists`) from each row's first lengths[r] tokens alone and takes int32
#: as well as int64 history of any strides, so a seam may hand it the framework's own rows
#: (stale tokens past each length) without a copy, as `specreg.adapters.vllm_proposers` does
#: with vLLM's token_ids_cpu. Otherwise a drafter gets a zero-padded int64 copy, as
#: `ChainDrafterProtocol.propose` says.
READS_WITHIN_LENGTHS = "reads_within_lengths"


def reads_within_lengths(drafter: object) -> bool:
    """Whether `drafter` declares `reads_within_lengths = True` (exactly True)."""
    return getattr(drafter, READS_WITHIN_LENGTHS, False) is True


def drafter_needs(drafter: object) -> str | None:
    """The `needs` a drafter declares, or None when it declares none (or not as a string)."""
    value = getattr(drafter, "needs", None)
    return value if isinstance(value, str) else None


@runtime_checkable
class ChainDrafterProtocol(Protocol):
    """Proposes a chain of `gamma` tokens per request without a draft model."""

    gamma: int

    def propose(
        self, history: torch.Tensor, lengths: torch.Tensor, *, draft_lengths: Any = None
    ) -> torch.Tensor:
        """`history` int64 [b, L], `lengths` [b] -> drafts int64 [b, gamma]; with
        `draft_lengths` [b] request r proposes at most draft_lengths[r] (0: none), a real
        token (its last) filling the rest."""


@runtime_checkable
class HistoryTreeDrafterProtocol(Protocol):
    """A model-free drafter that can propose trees from the token history (SGLang's NGRAM trie,
    suffix trees): `proposes_trees` says whether its plan asked for trees;
    `propose_tree(history [b, L], lengths [b])` returns b trees of `num_draft_tokens` slots in
    breadth-first order (`tokens`, `parents` (-1 for the root), `valid`, `depth` [b, N] and
    `ancestors()` [b, N, N]), verified by the plan's verifier (`verify_tree_greedy`,
    `verify_tree_sampling`); `draft_lengths=` [b] keeps request r's nodes at depth <= its
    length, in both."""

    proposes_trees: bool

    def propose_tree(self, history: torch.Tensor, lengths: torch.Tensor) -> Any: ...


@runtime_checkable
class TreeDrafterProtocol(Protocol):
    """Turns the draft model's logits and hidden states into a draft tree, step by step.

    `start(logits [b, V], hidden [b, H])` opens a draft from the draft-extend output;
    `step(draft, logits [b*topk, V], hidden [b*topk, H])` adds one level;
    `draft.input_ids` / `draft.hidden` are what the draft model runs next; after the candidate's
    `num_steps` levels, `tree(draft, bonus_tokens, seq_lens)` assembles the verify tree
    (`draft_lengths=` [b]: request r's tree keeps its nodes at depth <= draft_lengths[r]).
    """

    topk: int
    num_steps: int
    num_draft_tokens: int

    def start(self, logits: torch.Tensor, hidden: torch.Tensor) -> Any: ...

    def step(self, draft: Any, logits: torch.Tensor, hidden: torch.Tensor) -> Any: ...

    def tree(
        self, draft: Any, bonus_tokens: torch.Tensor, seq_lens: torch.Tensor, *,
        mask_mode: str | None = None, draft_lengths: Any = None,
    ) -> Any: ...


@runtime_checkable
class BlockDrafterProtocol(Protocol):
    """Drafts a block in one draft forward: build its inputs, then propose from its logits.

    `make_head(vocab_size=, hidden_size=)` returns the (untrained) head module the proposal
    walks, or None when the algorithm has none; the framework loads the checkpoint's weights
    into it. `propose(..., gamma=g)` proposes the first g tokens (an adaptive candidate);
    `propose(..., draft_lengths=)` at most draft_lengths[r] per request, the anchor filling.
    `sample_from_anchor` is False in the bonus-anchor layout, where the block's slot 0 only
    conditions (pass the base logits from slot 1 on); `mask_token_id` fills the block.
    """

    gamma: int
    draft_width: int
    mask_token_id: int | None
    sample_from_anchor: bool

    def build_draft_block(
        self, anchor: torch.Tensor, anchor_positions: torch.Tensor, *,
        vocab_size: int | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def make_head(self, *, vocab_size: int, hidden_size: int) -> Any: ...

    def propose(
        self, base_logits: torch.Tensor, anchor: torch.Tensor, *, head: Any = None,
        hidden: torch.Tensor | None = None, temperature: float = 0.0,
        generator: torch.Generator | None = None, gamma: int | None = None,
        draft_lengths: Any = None,
    ) -> tuple[torch.Tensor, torch.Tensor | None]: ...

    def candidates(self, anchor: torch.Tensor, draft_tokens: torch.Tensor) -> torch.Tensor: ...


@runtime_checkable
class DraftModelDrafterProtocol(Protocol):
    """A chain drafter driving a draft model the framework runs (a standalone draft model).

    `draft(model, history [b, L], lengths [b], cache_lens [b], *, gamma=, temperature=,
    generator=)` feeds the draft model (`model(tokens, start, counts) -> logits [b, V]`) what
    its KV lacks up to the anchor, then drafts `gamma` tokens: a draft with `tokens` [b, gamma],
    `q` (None at temperature 0) and `candidates(anchor)`; `draft_lengths=` [b] caps each
    request's drafts. `rollback(lengths, num_accepted, gamma)` gives the draft KV lengths to
    keep after verification.
    """

    gamma: int

    def draft(
        self, model: Any, history: torch.Tensor, lengths: torch.Tensor,
        cache_lens: torch.Tensor, *, gamma: int | None = None, temperature: float = 0.0,
        generator: torch.Generator | None = None, draft_lengths: Any = None,
    ) -> Any: ...

    def rollback(self, lengths: torch.Tensor, num_accepted: torch.Tensor, *args: Any) -> Any: ...


@runtime_checkable
class HeadsDrafterProtocol(Protocol):
    """A tree drafter reading heads on the target's hidden states (Medusa): one logits row
    per head, `tree_from_heads(head_logits [b, heads, V], bonus_tokens, seq_lens)`, besides
    the `TreeDrafterProtocol` steps."""

    num_steps: int

    def tree_from_heads(
        self, head_logits: torch.Tensor, bonus_tokens: torch.Tensor, seq_lens: torch.Tensor,
    ) -> Any: ...


# -------------------------------------------------------------------------------- cache swapper
@runtime_checkable
class CacheSwapperProtocol(Protocol):
    """Keeps each request's KV rows in a device buffer backed by a host cache.

    `swap(...)` resolves every verify step of one call and returns the device locations of the
    rows read; `last_stats` describes the last call (hits, misses, ...).
    """

    layout: Any
    last_stats: Any

    def new_host_cache(self, *args: Any, **kwargs: Any) -> torch.Tensor: ...

    def new_device_buffer(self, row_elems: int, dtype: Any = ...) -> torch.Tensor: ...

    def reset_request(self, slot: int) -> None: ...

    def write_tail(self, *args: Any, **kwargs: Any) -> Any: ...

    def swap(self, *args: Any, **kwargs: Any) -> torch.Tensor: ...


VERIFIER_PROTOCOLS: dict[str, type] = {
    "chain": ChainVerifierProtocol,
    "block": ChainVerifierProtocol,
    "tree": TreeVerifierProtocol,
}
DRAFTER_PROTOCOLS: dict[str, type] = {
    "chain": ChainDrafterProtocol,
    "block": BlockDrafterProtocol,
    "tree": TreeDrafterProtocol,
}


@functools.cache
def protocol_members(protocol: type) -> tuple[str, ...]:
    """The attribute and method names a protocol requires, sorted."""
    names = set(getattr(protocol, "__annotations__", {}))
    names |= {
        name
        for name, value in vars(protocol).items()
        if not name.startswith("_") and callable(value)
    }
    return tuple(sorted(names))


def missing_members(obj: object, protocol: type) -> list[str]:
    """What `obj` lacks of `protocol`: absent attributes, and methods that are not callable or
    do not take the protocol's positional arguments."""
    out = []
    for name in protocol_members(protocol):
        if not hasattr(obj, name):
            out.append(name)
            continue
        wanted = vars(protocol).get(name)
        if callable(wanted):
            got = getattr(obj, name)
            if not callable(got):
                out.append(f"{name} (not callable)")
            elif not _takes_positionals(got, *_required_positionals(wanted)):
                out.append(f"{name} (signature)")
    return out


@functools.cache
def _required_positionals(wanted: Callable[..., Any]) -> tuple[int, bool]:
    """How many positional arguments (self aside) a protocol method passes, and whether it
    leaves the rest open (`*args`: then an implementation may require more)."""
    params = list(inspect.signature(wanted).parameters.values())[1:]  # drop self
    count = sum(
        1
        for p in params
        if p.kind in (p.POSITIONAL_ONLY, p.POSITIONAL_OR_KEYWORD)
        and p.default is inspect.Parameter.empty
    )
    return count, any(p.kind is p.VAR_POSITIONAL for p in params)


def _takes_positionals(got: Callable[..., Any], count: int, open_ended: bool) -> bool:
    """Whether `got` accepts the `count` positional arguments the protocol passes and requires
    no more (unless the protocol is open-ended), read from its code object (cheap: resolve
    checks every plan object); callables without one get the benefit of the doubt."""
    func = getattr(got, "__func__", got)  # a bound method's function; `self` is then bound
    func = getattr(func, "__wrapped__", func)  # the method under `specreg.step.call_keywords`' check
    code = getattr(func, "__code__", None)
    if code is None:
        return True
    bound = 1 if hasattr(got, "__self__") else 0
    takes = code.co_argcount - bound
    varargs = bool(code.co_flags & inspect.CO_VARARGS)
    required = takes - len(getattr(func, "__defaults__", None) or ())
    return (varargs or count <= takes) and (open_ended or required <= count)
