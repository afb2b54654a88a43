"""The drafter-invariant verify mode checked end to end: its tokens against plain keyed sampling.

`check_invariant` resolves a config with `verify_mode='invariant'`, generates with sampling
under fixed request keys, and generates again with every draft length 0 (one plain SAMPLE-role
draw per step through the same verifier and the same target forward), which is plain keyed
sampling: the two must be equal token for token. It also measures the accepted drafts per
draft beside the standard rule's on the same keys, and the (1 - d) / (1 + d) bound. A plan
whose verifier does not run the mode (SR133 at resolve), or whose drafter cannot leave its
drafts out (no `draft_lengths`), is reported as not run, with the reason.
"""

from __future__ import annotations

import inspect
from typing import Any

import attrs
import torch

from specreg.errors import ConfigError
from specreg.registry.registry import Registry
from specreg.testing.loop import GenerationResult, SpeculativeLoop
from specreg.testing.toy_model import ToyLM

#: The request keys of the check (one per prompt).
INVARIANT_KEYS = (101, 202, 303, 404, 505, 606, 707, 808)


@attrs.frozen(kw_only=True)
class InvariantCheck:
    """equal: the invariant mode's tokens equal plain keyed sampling (None: not run, `note`
    says why); invariant_rate / standard_rate: accepted drafts per draft under each rule."""

    equal: bool | None = None
    invariant_rate: float | None = None
    standard_rate: float | None = None
    note: str | None = None

    @property
    def bound(self) -> float | None:
        return None if self.standard_rate is None else invariant_bound(self.standard_rate)


def invariant_bound(standard_rate: float) -> float:
    """The drafter-invariant rule's guaranteed match rate (1 - d) / (1 + d) for a drafter that
    races on q with the target's keys, with 1 - d the standard rule's acceptance rate (its
    acceptance per sampled draft is 1 - TV(p, q)). By convexity in d, the bound at the mean d
    is a lower bound of the mean match rate."""
    return standard_rate / (2.0 - standard_rate) if standard_rate < 2.0 else 0.0


def check_invariant(
    registry: Registry, config: dict[str, Any], target: ToyLM, draft: ToyLM,
    prompts: torch.Tensor, num_new: int, *, seed: int,
) -> InvariantCheck:
    """Run the check (module docstring) for `config` on the toy models."""
    try:
        plan = registry.resolve({**config, "verify_mode": "invariant"})
    except ConfigError as exc:
        first = exc.problems[0]
        return InvariantCheck(note=f"{first.code}: {first.message.split(',')[0]}")
    propose = getattr(plan.drafter, "propose", None)
    if callable(propose) and "draft_lengths" not in inspect.signature(propose).parameters:
        return InvariantCheck(note="the drafter takes no draft_lengths, so the plain run "
                              "(every draft length 0) cannot go through it")
    keys = torch.tensor(INVARIANT_KEYS[: prompts.shape[0]], dtype=torch.int64)

    def run(config_plan: Any, lengths: Any = None) -> GenerationResult:
        loop = SpeculativeLoop(config_plan, target, draft, sampling=True, seed=seed, keys=keys,
                               draft_lengths=lengths)
        return loop.generate(prompts, num_new)

    spec = run(plan)
    plain = run(plan, [0] * prompts.shape[0])
    standard = run(registry.resolve(config)).acceptance
    return InvariantCheck(
        equal=bool(torch.equal(spec.tokens, plain.tokens)),
        invariant_rate=spec.acceptance.acceptance_rate if spec.acceptance else None,
        standard_rate=standard.acceptance_rate if standard else None,
    )
