"""vLLM `custom_class` proposers that run a specreg plugin's drafter (`plan.drafter`).

Name the algorithm as the class: `{"method": "custom_class", "model":
"specreg.adapters.vllm_proposers.ngram", "num_speculative_tokens": 3}` runs the ngram plugin's
drafter under vLLM, with the plan resolved for k = num_speculative_tokens (gamma).
vLLM calls `propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=...)`
and takes one list of draft token ids per request. That seam hands over token ids only, so the
proposer takes a drafter by what it declares it needs (`drafter.needs`,
`specreg.protocols.DRAFTER_NEEDS`): "token_history" drafters (ngram, suffix, a third party's)
run; one that needs the target's hidden states or a draft model (EAGLE, Medusa, DSpark, DFlash,
draft_model) is refused when vLLM constructs the proposer (SR175, naming the seam), never at the
first step; one that declares nothing, or a need the protocol does not know, is its plugin's
error (SR190). As vLLM's own ngram
proposer, a request gets no drafts when it is not decoding, when it has reached the model's
maximum length (and at most the room left below it), and when the drafter found no match (a
drafter's `propose_lists(history, lengths)`, when it has one, says how many tokens it really
proposed). A NAME no loaded plugin registered is refused where vLLM looks the class up
(SR101, with the closest name), not when vLLM builds the proposer.
"""

from __future__ import annotations

from typing import Any

from specreg.errors import PluginError, UnknownNameError, problem
from specreg.protocols import DRAFTER_NEEDS, TOKEN_HISTORY, drafter_needs

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
        + " (specreg.protocols.DRAFTER_NEEDS), agreeing with the AlgorithmSpec",
        fix=f"in the plugin, set the class attribute needs = {TOKEN_HISTORY!r} on {kind} when "
        "propose(history, lengths) needs nothing else (the plugin's author's fix)",
    ))


class SpecregProposer:
    """A vLLM proposer that drafts with the drafter of the specreg algorithm `algorithm`."""

    algorithm: str = ""

    def __init__(self, vllm_config: Any, *, registry: Any = None) -> None:
        from specreg.registry import Registry

        spec = vllm_config.speculative_config
        self.k = int(spec.num_speculative_tokens)
        model_config = getattr(vllm_config, "model_config", None)
        self.max_model_len = getattr(model_config, "max_model_len", None)
        registry = registry or Registry.load()
        self.plan = registry.resolve({"algorithm": self.algorithm, "num_draft_tokens": self.k + 1})
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
        import torch

        drafts: list[list[int]] = [[] for _ in sampled_token_ids]
        active = [
            i for i, sampled in enumerate(sampled_token_ids)
            if len(sampled) > 0 and self.room(int(num_tokens_no_spec[i])) > 0
        ]
        if not active:
            return drafts
        rows = [token_ids_cpu[i, : int(num_tokens_no_spec[i])] for i in active]
        lengths = torch.tensor([len(r) for r in rows], dtype=torch.long)
        history = torch.zeros(len(rows), int(lengths.max()), dtype=torch.long)
        for row, tokens in enumerate(rows):
            history[row, : len(tokens)] = torch.as_tensor(tokens, dtype=torch.long)
        as_lists = getattr(self.drafter, "propose_lists", None)
        if callable(as_lists):  # what it really proposed: fewer, or none where nothing matched
            proposed = [list(p)[: self.k] for p in as_lists(history, lengths)]
        else:
            proposed = self.drafter.propose(history, lengths)[:, : self.k].tolist()
        for row, i in enumerate(active):
            room = self.room(int(num_tokens_no_spec[i]))
            drafts[i] = [int(t) for t in proposed[row][:room]]
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
    from specreg.registry import Registry

    registry = Registry.load()
    try:
        registry.get_algorithm(name)
    except UnknownNameError:
        where = 'the speculative config\'s "model" (specreg.adapters.vllm_proposers.NAME)'
        raise UnknownProposerError(
            unknown_name_problem(registry, name, "algorithm", flag=where)
        ) from None
    return proposer_class(name)
