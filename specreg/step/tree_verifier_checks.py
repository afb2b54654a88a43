"""The tree verifier's refusals: an unknown mask mode, a chain acceptance rule on a tree, a lossy
rule that cannot reach a path, and the invariant rule beside a lossy one."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specreg.contract.tree_sizes import MASK_MODES
from specreg.errors import KernelInputError, problem

if TYPE_CHECKING:
    import torch

    from specreg.contract.acceptance_rules import AcceptanceRule


def check_mask_mode(mask_mode: str) -> None:
    """SR211 unless `mask_mode` is one of the layouts `build_tree` writes."""
    if mask_mode not in MASK_MODES:
        raise KernelInputError(
            problem("SR211", f"tree mask mode {mask_mode!r} is not known",
                    accepted=", ".join(MASK_MODES), fix="pass one of the accepted modes",
                    field="mask_mode")
        )


def check_chain_rule(acceptance: AcceptanceRule, topk: int) -> None:
    """SR315: typical and synthetic acceptance are chain rules, refused on a tree (topk > 1)."""
    if acceptance.kind in ("typical", "synthetic") and topk != 1:
        raise KernelInputError(
            problem("SR315", f"{acceptance.kind} acceptance is a chain rule, and "
                    f"topk={topk} drafts a tree",
                    accepted="typical or synthetic acceptance with topk 1",
                    fix="set --speculative-eagle-topk 1, or use the accept thresholds",
                    field="acceptance")
        )


def refuse_chain_rule(acceptance: AcceptanceRule, path: str, *, synthetic_only: bool = False) -> None:
    """SR316: typical / synthetic acceptance does not reach `path` (no silent fallback);
    `synthetic_only`: only the synthetic rule is refused there."""
    chain_rule = acceptance.kind in ("typical", "synthetic")
    if not chain_rule or (synthetic_only and not acceptance.synthetic):
        return
    raise KernelInputError(
        problem("SR316", f"{acceptance.kind} acceptance (lossy) does not reach {path}",
                accepted="verify_sampling without params=, verify_greedy with target_logits",
                fix="filter the probabilities and call verify_sampling without params=",
                field="acceptance")
    )


def invariant_modes(
    invariant: Any, plan_invariant: bool, acceptance: AcceptanceRule, candidates: torch.Tensor
) -> bool | torch.Tensor:
    """The call's verify modes (`specreg.step.verify_modes.requested_modes`: the call's
    `invariant`, a bool or one bool per request, else the plan's verify mode); SR133 beside
    a lossy acceptance rule."""
    from specreg.step.verify_modes import requested_modes

    chosen = requested_modes(invariant, plan_invariant, candidates.shape[0], candidates.device)
    if chosen is not False and acceptance.lossy:
        raise KernelInputError(problem(
            "SR133", f"the invariant rule was asked for under the plan's lossy "
            f"{acceptance.kind} acceptance rule",
            accepted="the invariant rule with lossless acceptance",
            fix="resolve the plan without the lossy acceptance setting", field="invariant",
        ))
    return chosen
