"""vLLM `custom_class` proposers that run a specreg plugin's drafter (`plan.drafter`).

Name the algorithm as the class: `{"method": "custom_class", "model":
"specreg.adapters.vllm_proposers.ngram", "num_speculative_tokens": 3}` runs the ngram plugin's
drafter under vLLM, with the plan resolved for k = num_speculative_tokens (gamma).
vLLM calls `propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=...)`
and takes one list of draft token ids per request. That seam hands over token ids only, so the
proposer takes a drafter by what it declares it needs (`drafter.needs`,
`specreg.contract.protocols.DRAFTER_NEEDS`): "token_history" drafters (ngram, suffix, a third party's)
run; one that needs the target's hidden states or a draft model (EAGLE, Medusa, DSpark, DFlash,
draft_model) is refused when vLLM constructs the proposer (SR175, naming the seam), never at the
first step; one that declares nothing, or a need the protocol does not know, is its plugin's
error (SR190).

A drafter that keeps state per request (suffix: it has arctic-inference's request API,
`start_request`, `add_active_response`, `speculate`, `stop_request`, `active_requests`) is
driven exactly as vLLM's own suffix proposer drives arctic-inference's cache: a request
starts with its prompt, each step's sampled tokens are added to it (its first sampled token
included), it speculates on its last tokens with at most min(k, max_model_len - tokens - 1)
drafts, and it stops when it leaves the batch. The seam gives no request ids, so they come from
the rows' tokens (`specreg.adapters.vllm_rows`), never from a row's index or first token. Such
a proposer takes vLLM's `suffix_decoding_*` options from the speculative config. Any other
drafter is asked for the whole batch at once, as vLLM's own ngram proposer works: a request gets
no drafts when it is not decoding, when its context is empty, when it has reached the model's
maximum length (and at most the room left below it), and when the drafter found no match (a
drafter's `propose_lists(history, lengths)`, when it has one, says how many tokens it really
proposed). Its history is a zero-padded int64 copy of the decoding rows, or, for a drafter that
declares `reads_within_lengths` (`specreg.contract.protocols`), vLLM's rows in place: a view of
token_ids_cpu when the decoding rows lead the batch, one gather of them otherwise. A NAME no
loaded plugin registered is refused where vLLM looks the class up (SR101, with the closest
name), not when vLLM builds the proposer.
"""

from __future__ import annotations

from typing import Any

from specreg.adapters.vllm_rows import RowRequests
from specreg.errors import PluginError, UnknownNameError, problem
from specreg.contract.protocols import (
    DRAFTER_NEEDS,
    TOKEN_HISTORY,
    drafter_needs,
    reads_within_lengths,
)

#: What a drafter keyed by request offers (arctic-inference's SuffixDecodingCache API), besides
#: its `active_requests`.
REQUEST_API = ("start_request", "add_active_response", "speculate", "stop_request")
#: vLLM's speculative-config fields that carry an algorithm's options under custom_class
#: (vLLM sets prompt_lookup_min/max to 0 there, so ngram's sizes cannot come this way).
VLLM_OPTION_FIELDS: dict[str, tuple[str, ...]] = {
    "suffix": ("suffix_decoding_max_tree_depth", "suffix_decoding_max_cached_requests",
               "suffix_decoding_max_spec_factor", "suffix_decoding_min_token_prob"),
}

SEAM = (
    "vLLM's custom_class seam, propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu), "
    "which hands a proposer token ids only"
)


def _refusal(algorithm: str, why: str) -> PluginError:
    return PluginError(problem(
        "SR175", f"specreg algorithm {algorithm!r} cannot run behind {SEAM}: {why}",
        accepted="an algorithm whose drafter proposes from the token history alone (e.g. ngram)",
        fix="name such an algorithm in the speculative config's model "
        "(specreg.adapters.vllm_proposers.NAME), or use vLLM's own method for this drafter "
        "(method 'eagle', 'dspark', 'dflash' with SPECREG_VLLM=enforce)",
    ))


_NEEDS_WORDS = {
    "target_hidden_states": "the target model's hidden states",
    "draft_model": "a draft model that vLLM runs for it",
}


def _undeclared(algorithm: str, drafter: Any, needs: str | None, *,
                contradicts: bool = False) -> PluginError:
    kind = type(drafter).__qualname__
    if contradicts:
        why = (f"its drafter {kind} declares needs={needs!r}, but the algorithm's spec says it "
               "uses the target's hidden states (uses_target_hidden_states=True)")
    elif needs is None:
        why = f"its drafter {kind} declares no `needs`"
    else:
        why = f"its drafter {kind} declares needs={needs!r}"
    return PluginError(problem(
        "SR190", f"specreg algorithm {algorithm!r}: {why}, so vLLM's custom_class seam cannot "
        "tell whether it drafts from token ids alone",
        accepted="needs = " + ", ".join(repr(n) for n in DRAFTER_NEEDS)
        + " (specreg.contract.protocols.DRAFTER_NEEDS), agreeing with the AlgorithmSpec",
        fix=f"in the plugin, set the class attribute needs = {TOKEN_HISTORY!r} on {kind} when "
        "propose(history, lengths) needs nothing else (the plugin's author's fix)",
    ))


class SpecregProposer:
    """A vLLM proposer that drafts with the drafter of the specreg algorithm `algorithm`.

    `draft_config` (programmatic use and tests) gives the algorithm's options in place of the
    ones vLLM's speculative config carries (`VLLM_OPTION_FIELDS`)."""

    algorithm: str = ""

    def __init__(self, vllm_config: Any, *, registry: Any = None,
                 draft_config: dict[str, Any] | None = None) -> None:
        from specreg.registry.registry import Registry

        spec = vllm_config.speculative_config
        self.k = int(spec.num_speculative_tokens)
        model_config = getattr(vllm_config, "model_config", None)
        self.max_model_len = getattr(model_config, "max_model_len", None)
        registry = registry or Registry.load()
        if draft_config is None:
            draft_config = {name: getattr(spec, name) for name in
                            VLLM_OPTION_FIELDS.get(self.algorithm, ())
                            if getattr(spec, name, None) is not None}
        config: dict[str, Any] = {"algorithm": self.algorithm, "num_draft_tokens": self.k + 1}
        if draft_config:
            config["draft_config"] = dict(draft_config)
        self.plan = registry.resolve(config)
        drafter = self.plan.drafter
        if drafter is None or not callable(getattr(drafter, "propose", None)):
            raise _refusal(self.algorithm, "its plugin builds no drafter with a propose method")
        needs = drafter_needs(drafter)
        if needs not in DRAFTER_NEEDS:
            raise _undeclared(self.algorithm, drafter, needs)
        if needs != TOKEN_HISTORY:
            raise _refusal(self.algorithm, f"its drafter needs {_NEEDS_WORDS[needs]} "
                           f"(it declares needs={needs!r})")
        if self.plan.algorithm.uses_target_hidden_states:
            raise _undeclared(self.algorithm, drafter, needs, contradicts=True)
        self.drafter = drafter
        #: the drafter reads vLLM's token_ids_cpu rows in place (no copy): it declares that it
        #: reads within the lengths only (`specreg.contract.protocols.reads_within_lengths`)
        self.in_place = reads_within_lengths(drafter)
        self.requests: RowRequests | None = None
        if hasattr(drafter, "active_requests") and all(
                callable(getattr(drafter, name, None)) for name in REQUEST_API):
            self.requests = RowRequests()

    def room(self, num_tokens: int) -> int:
        """How many drafts fit below the model's maximum length (vLLM's ngram rule)."""
        if self.max_model_len is None:
            return self.k
        return max(0, min(self.k, int(self.max_model_len) - num_tokens))

    def propose(
        self,
        sampled_token_ids: list[list[int]],
        num_tokens_no_spec: Any,
        token_ids_cpu: Any,
        slot_mappings: Any = None,
    ) -> list[list[int]]:
        if self.requests is not None:
            return self._propose_by_request(sampled_token_ids, num_tokens_no_spec,
                                            token_ids_cpu)
        import numpy as np
        import torch

        drafts: list[list[int]] = [[] for _ in sampled_token_ids]
        counts = np.asarray(num_tokens_no_spec)[: len(drafts)].astype(np.int64).tolist()
        limit = self.max_model_len
        if limit is None or max(counts, default=0) <= int(limit) - self.k:
            rooms = [self.k] * len(counts)  # self.room, for every row at once
        else:
            rooms = [self.room(n) for n in counts]
        active = [i for i, sampled in enumerate(sampled_token_ids)
                  if len(sampled) > 0 and counts[i] > 0 and rooms[i] > 0]
        if not active:
            return drafts
        sizes = [counts[i] for i in active]
        source = np.asarray(token_ids_cpu)
        width = max(sizes)
        if (self.in_place and source.dtype in (np.int32, np.int64)
                and source.flags.writeable):  # vLLM's own rows, stale tokens and all
            prefix = active[-1] == len(active) - 1  # rows 0..n-1 (active ascends): a view
            history = torch.from_numpy(source[: len(active), :width] if prefix
                                       else source[active, :width])
        else:
            rows = np.zeros((len(active), width), dtype=np.int64)  # not the stale tokens
            for row, (i, size) in enumerate(zip(active, sizes, strict=True)):
                rows[row, :size] = source[i, :size]  # one copy, cast to int64 as it goes
            history = torch.from_numpy(rows)
        lengths = torch.from_numpy(np.array(sizes, dtype=np.int64))
        as_lists = getattr(self.drafter, "propose_lists", None)
        if callable(as_lists):  # what it really proposed: fewer, or none where nothing matched
            proposed = as_lists(history, lengths)
        else:
            proposed = self.drafter.propose(history, lengths)[:, : self.k].tolist()
        for row, i in enumerate(active):  # rooms[i] <= k
            drafts[i] = list(map(int, list(proposed[row])[: rooms[i]]))
        return drafts

    def _propose_by_request(self, sampled_token_ids: list[list[int]], num_tokens_no_spec: Any,
                            token_ids_cpu: Any) -> list[list[int]]:
        """vLLM's SuffixDecodingProposer.propose, request ids told from the rows' tokens."""
        import numpy as np

        assert self.requests is not None
        drafter = self.drafter
        tokens = np.asarray(token_ids_cpu)
        seen = self.requests.assign(tokens, num_tokens_no_spec,
                                    [len(s) for s in sampled_token_ids])
        active = set(drafter.active_requests)
        drafts: list[list[int]] = []
        for i, (sampled, row) in enumerate(zip(sampled_token_ids, seen.rows, strict=True)):
            num_tokens = int(num_tokens_no_spec[i])
            full = self.max_model_len is not None and num_tokens >= self.max_model_len
            if row is None or not sampled or full:
                drafts.append([])  # prefill, or no room: not even the sampled tokens go in
                continue
            if row.key not in active:
                drafter.start_request(row.key, tokens[i, : row.start])
                active.add(row.key)
            drafter.add_active_response(row.key, [int(t) for t in sampled])
            limit = self.k
            if self.max_model_len is not None:
                limit = min(limit, int(self.max_model_len) - num_tokens - 1)
            draft = drafter.speculate(row.key, tokens[i, :num_tokens], max_spec_tokens=limit)
            drafts.append([int(t) for t in draft.tokens[: self.k]])
        for key in seen.left:
            if key in active:
                drafter.stop_request(key)
        return drafts

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to load: the drafter works from the token history."""


class UnknownProposerError(UnknownNameError, AttributeError):
    """`vllm_proposers.NAME` for an algorithm no loaded plugin registered (coded, and an
    AttributeError as every failed attribute lookup is)."""


def proposer_class(algorithm: str) -> type[SpecregProposer]:
    """The proposer class of `algorithm`, whatever registry will resolve it."""
    return type(f"SpecregProposer_{algorithm}", (SpecregProposer,), {"algorithm": algorithm})


def __getattr__(name: str) -> type[SpecregProposer]:
    """`specreg.adapters.vllm_proposers.NAME`, as vLLM looks up a custom_class: refused here,
    with the closest name (SR101), when no loaded plugin registered algorithm NAME."""
    if name.startswith("_"):
        raise AttributeError(name)
    from specreg._suggest import unknown_name_problem
    from specreg.registry.registry import Registry

    registry = Registry.load()
    try:
        registry.get_algorithm(name)
    except UnknownNameError:
        where = 'the speculative config\'s "model" (specreg.adapters.vllm_proposers.NAME)'
        raise UnknownProposerError(
            unknown_name_problem(registry, name, "algorithm", flag=where)
        ) from None
    return proposer_class(name)
