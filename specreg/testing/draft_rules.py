"""Which verify rule the reference loop's sampled requests run under per-request parameters.

With `params=` the loop verifies through the verifier's per-request-parameters method. Its
sampled requests then run one of two rules (`GenerationResult.verify_rule` says which):

- `with_draft`: the drafter draws every draft from the filtered q of the request's own
  parameters (`specreg.step.draft_sampling`) and the verifier gets the draft logits, so it runs
  rejection sampling against that q (chain and block: the classic rule; tree: the recursive
  rule over children drawn without replacement). Available when the drafts come from the toy
  draft model step by step (chain), from a drafter driving a draft model whose `draft` takes
  `params` (draft_model), from a block drafter whose `propose` takes `params`, from a tree
  drafter whose `start` takes `params` and that has `draft_logits`, or from a heads drafter
  (Medusa) whose `start` takes `params` and that has `draft_probs` (the filtered q itself).
- `target_only`: the drafts are deterministic (greedy draft-model proposals, model-free
  drafters) and the verifier gets no q; lossless for any proposal drawn independently of the
  verifier's coins.

`draft_rule='auto'` (the default) picks `with_draft` wherever the drafter supports it.
Without params the loop's rule is `greedy` or `sampling` (one temperature for the batch).
"""

from __future__ import annotations

import inspect
from typing import TYPE_CHECKING

import torch

from specreg.contract.protocols import HeadsDrafterProtocol, missing_members

if TYPE_CHECKING:
    from specreg.registry.plan import SpecPlan
    from specreg.contract.sampling_params import SamplingParams
    from specreg.testing.step_parts import Batch
    from specreg.testing.toy_model import ToyLM

DRAFT_RULES = ("auto", "with_draft", "target_only")


def _takes(obj: object, method: str, keyword: str) -> bool:
    found = getattr(obj, method, None)
    return callable(found) and keyword in inspect.signature(found).parameters


def can_draw_with_params(plan: SpecPlan, *, history_trees: bool) -> bool:
    """Whether the plan's drafts can be drawn from each request's filtered q."""
    drafter, drafting = plan.drafter, plan.algorithm.drafting
    if drafting == "block":
        return _takes(drafter, "propose", "params")
    if drafting == "tree":
        q_source = ("draft_logits" if missing_members(drafter, HeadsDrafterProtocol)
                    else "draft_probs")
        return _takes(drafter, "start", "params") and hasattr(drafter, q_source)
    if history_trees:
        return False
    if drafter is not None and _takes(drafter, "draft", "params"):
        return True  # a drafter driving a draft model (draft_model) draws with params
    return drafter is None  # the loop's own draft-model chain; model-free drafters are fixed


def resolve_rule(
    plan: SpecPlan, requested: str, *, params: SamplingParams | None, sampling: bool,
    history_trees: bool, constrained: bool = False,
) -> str:
    """The rule a loop runs: 'greedy' / 'sampling' without params, else 'with_draft' or
    'target_only' as `requested` ('auto' picks with_draft where the drafter can). A grammar
    (`constrained`) masks q at verify time, which a draft drawn before the mask was known does
    not follow, so a constrained loop runs the target-only rule."""
    if requested not in DRAFT_RULES:
        raise ValueError(f"draft_rule={requested!r}: choose one of {', '.join(DRAFT_RULES)}")
    if params is None:
        if requested != "auto":
            raise ValueError("draft_rule= chooses the rule of a params= batch: pass params=")
        return "sampling" if sampling else "greedy"
    able = not constrained and can_draw_with_params(plan, history_trees=history_trees)
    if requested == "with_draft" and not able:
        raise ValueError(
            f"plan for {plan.algorithm.name!r}: its drafter cannot draw from the requests' "
            "filtered q (draft_rule='with_draft'), or a grammar masks q after the draw; use "
            "draft_rule='target_only' or 'auto'"
        )
    if requested == "target_only" or not able:
        return "target_only"
    return "with_draft"


def sampled_draft_chain(
    draft: ToyLM, batch: Batch, gamma: int, params: SamplingParams, *,
    keys: torch.Tensor | None, filter_order: str | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """gamma drafts per request from the toy draft model, each drawn from the request's
    filtered q (greedy requests: the argmax): (candidates [b, gamma + 1], draft logits
    [b, gamma, V], the rows the drafts were drawn from). Draft j is the SAMPLE-role race at
    (the request's key, position lengths + j). `filter_order`: the plan's (None: the default
    order, as the verifiers read it)."""
    from specreg.step.draft_sampling import sample_rows
    from specreg.contract.filter_order import DEFAULT_FILTER_ORDER

    order = filter_order or DEFAULT_FILTER_ORDER

    b = batch.size
    ext = torch.cat([batch.seqs, torch.zeros(b, gamma + 1, dtype=torch.long)], dim=1)
    candidates, rows = [batch.last_tokens()], []
    for j in range(gamma):
        lengths = batch.lengths + j
        logits = draft.next_logits(ext, lengths).float()
        token = sample_rows(logits, params, keys=keys, positions=lengths,
                            filter_order=order).tokens
        ext[torch.arange(b), lengths] = token
        candidates.append(token)
        rows.append(logits)
    return torch.stack(candidates, 1), torch.stack(rows, 1)
