"""What a plan's drafter contributes, checked: proposals of the promised shape and vocabulary
(SR147, SR148), and a notice when a plugin brings no drafting code at all (SR151)."""

from __future__ import annotations

from typing import Any

import torch

from specreg.errors import PluginError, Problem, problem

#: What the demo and the kit show for a plan without a drafter.
TOY_DRAFTER = "toy model"


def check_proposals(drafts: Any, batch: int, gamma: int, vocab_size: int, algorithm: str) -> None:
    """Raise SR147/SR148 unless `drafts` is an integer [batch, gamma] tensor of token ids."""
    where = (
        f"the drafter of {algorithm!r} (from specreg_make_drafter) returned from "
        "propose(history, lengths)"
    )
    if (
        not isinstance(drafts, torch.Tensor)
        or drafts.dtype.is_floating_point
        or drafts.dtype == torch.bool
        or tuple(drafts.shape) != (batch, gamma)
    ):
        got = (
            f"a {drafts.dtype} tensor of shape {list(drafts.shape)}"
            if isinstance(drafts, torch.Tensor)
            else f"a {type(drafts).__name__}"
        )
        raise PluginError(
            problem(
                "SR147",
                f"{where} {got}; the plan's gamma is {gamma}, so it must be [batch, gamma] = "
                f"[{batch}, {gamma}] of token ids",
                accepted=f"an int64 tensor of shape [{batch}, {gamma}]",
                fix="return plan.gamma draft tokens per request from propose, one row per "
                "request (torch.stack(tokens, dim=1) for a list of per-step columns)",
                field="drafter.propose",
            )
        )
    low, high = int(drafts.min()), int(drafts.max())
    if low < 0 or high >= vocab_size:
        bad = low if low < 0 else high
        raise PluginError(
            problem(
                "SR148",
                f"{where} token id {bad}, outside the vocabulary [0, {vocab_size})",
                accepted=f"token ids in [0, {vocab_size})",
                fix="propose only real token ids (fill requests without a proposal with the "
                "last token, not -1 or a sentinel)",
                field="drafter.propose",
            )
        )


def drafter_label(plan: Any) -> str:
    """'plugin' when the plan has a drafter, else the toy model that stands in for one."""
    return "plugin" if plan.drafter is not None else TOY_DRAFTER


def no_drafting_code(plan: Any) -> Problem | None:
    """SR151 (a notice) when neither the drafter nor the verifier comes from the plugin: then
    a run exercises only specreg's toy draft model and core verifier."""
    verifier_module = type(plan.verifier).__module__ if plan.verifier is not None else "specreg."
    if plan.drafter is not None or not verifier_module.startswith("specreg."):
        return None
    return problem(
        "SR151",
        f"algorithm {plan.algorithm.name!r} has no drafter (specreg_make_drafter returned "
        f"nothing) and uses specreg's own verifier, so specreg's toy draft model drafted: the "
        f"result measures the toy model, not the plugin",
        accepted="an algorithm whose plugin implements specreg_make_drafter",
        fix="implement specreg_make_drafter returning "
        + ("a BlockDrafterProtocol object" if plan.algorithm.drafting == "block"
           else "a ChainDrafterProtocol object (gamma, propose(history, lengths))")
        + f", for {plan.algorithm.name!r} only: return None for every other algorithm",
        field="drafter",
        severity="warning",
    )
