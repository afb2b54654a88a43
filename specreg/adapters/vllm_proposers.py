"""vLLM `custom_class` proposers that run a specreg plugin's drafter (`plan.drafter`).

Name the algorithm as the class: `{"method": "custom_class", "model":
"specreg.adapters.vllm_proposers.ngram", "num_speculative_tokens": 3}` runs the ngram plugin's
drafter under vLLM, with the plan resolved for k = num_speculative_tokens (gamma).
vLLM calls `propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu, slot_mappings=...)`
and takes one list of draft token ids per request (empty where a request is not decoding, and
where the drafter proposes nothing: a drafter's `propose_lists(history, lengths)`, when it has
one, says how many tokens it really proposed).
"""

from __future__ import annotations

from typing import Any

from specreg.errors import PluginError, problem


class SpecregProposer:
    """A vLLM proposer that drafts with the drafter of the specreg algorithm `algorithm`."""

    algorithm: str = ""

    def __init__(self, vllm_config: Any, *, registry: Any = None) -> None:
        from specreg.registry import Registry

        spec = vllm_config.speculative_config
        self.k = int(spec.num_speculative_tokens)
        registry = registry or Registry.load()
        self.plan = registry.resolve({"algorithm": self.algorithm, "num_draft_tokens": self.k + 1})
        if self.plan.drafter is None or not callable(getattr(self.plan.drafter, "propose", None)):
            raise PluginError(problem(
                "SR175", f"specreg algorithm {self.algorithm!r} builds no drafter with a propose method",
                accepted="an algorithm whose plugin implements specreg_make_drafter (e.g. ngram)",
                fix="name such an algorithm in the speculative config's model "
                "(specreg.adapters.vllm_proposers.NAME)",
            ))
        self.drafter = self.plan.drafter

    def propose(
        self,
        sampled_token_ids: list[list[int]],
        num_tokens_no_spec: Any,
        token_ids_cpu: Any,
        slot_mappings: Any = None,
    ) -> list[list[int]]:
        import torch

        drafts: list[list[int]] = [[] for _ in sampled_token_ids]
        active = [i for i, sampled in enumerate(sampled_token_ids) if len(sampled) > 0]
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
            drafts[i] = [int(t) for t in proposed[row]]
        return drafts

    def load_model(self, *args: Any, **kwargs: Any) -> None:
        """Nothing to load: the drafter works from the token history."""


def __getattr__(name: str) -> type[SpecregProposer]:
    if name.startswith("_"):
        raise AttributeError(name)
    return type(f"SpecregProposer_{name}", (SpecregProposer,), {"algorithm": name})
