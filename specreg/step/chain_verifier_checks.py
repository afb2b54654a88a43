"""The chain verifier's refusals: its verify widths, a call's width and verify modes, a seed
beside per-request parameters, and a lossy plan rule that cannot reach a path."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from specreg.errors import KernelInputError, problem
from specreg.integers import is_int

if TYPE_CHECKING:
    import torch


def verify_widths(num_draft_tokens: int, widths: Sequence[int] | None) -> tuple[int, ...]:
    """The accepted widths, sorted (SR904 unless positive ints with num_draft_tokens the
    largest)."""
    accepted = tuple(sorted({*(widths or ()), num_draft_tokens}))
    bad = [w for w in accepted if not is_int(w) or w < 1]
    if bad or max(accepted) != num_draft_tokens:
        raise KernelInputError(problem(
            "SR904",
            f"num_draft_tokens={num_draft_tokens!r} with widths={list(accepted)!r} is not a "
            "positive integer that is the largest accepted width",
            accepted="integers >= 1 (the anchor plus gamma drafts); num_draft_tokens the largest",
            fix="pass the resolved plan's verify widths", field="num_draft_tokens",
        ))
    return accepted


def check_width(candidates: torch.Tensor, widths: tuple[int, ...]) -> None:
    """SR900 unless `candidates` is [b, n] with n one of the plan's verify widths."""
    if candidates.dim() == 2 and candidates.shape[1] in widths:
        return
    from specreg.kernels.checks import check_shape

    check_shape("candidates", candidates, (None, None))
    raise KernelInputError(problem(
        "SR900",
        f"candidates has width {candidates.shape[1]}, not one of the plan's verify widths "
        f"{list(widths)}",
        accepted=f"candidates [b, n] with n in {list(widths)}",
        fix="draft the gamma of the main config or of one adaptive candidate", field="candidates",
    ))


def verify_modes(invariant: Any, candidates: torch.Tensor, plan_mode: str,
                 lossy_rule: str | None) -> bool | torch.Tensor:
    """The call's verify modes (`specreg.step.verify_modes.requested_modes`: the call's `invariant`,
    a bool or one bool per request, else the plan's mode); SR133 when the invariant rule would
    meet the plan's lossy rule (`lossy_rule`, None when lossless)."""
    from specreg.kernels.checks import check_shape
    from specreg.step.verify_modes import requested_modes

    check_shape("candidates", candidates, (None, None))
    chosen = requested_modes(invariant, plan_mode == "invariant", candidates.shape[0],
                             candidates.device)
    if chosen is not False and lossy_rule is not None:
        raise KernelInputError(problem(
            "SR133",
            f"the invariant rule was asked for under the plan's lossy {lossy_rule} acceptance "
            "rule",
            accepted="the invariant rule with lossless acceptance",
            fix="resolve the plan without the lossy acceptance setting", field="invariant",
        ))
    return chosen


def refuse_seed_with_params(seed: Any) -> None:
    """SR910: with per-request parameters the seeds are per request."""
    if seed is not None:
        raise KernelInputError(problem(
            "SR910", "seed= and params= were both given; with params the seeds are per request",
            accepted="params.seed (one per request, -1 = unseeded)",
            fix="drop seed= and put the seed in SamplingParams.of(..., seed=...)", field="seed",
        ))


def refuse_lossy(rule: str, path: str) -> None:
    """SR196: a lossy plan's rule cannot reach `path`; verifying losslessly there instead would
    be a silent fallback."""
    raise KernelInputError(problem(
        "SR196", f"the plan's acceptance rule ({rule}, lossy) does not reach {path}",
        accepted="verify_sampling / verify_target_only / verify_from_logits (with or without "
        "params=), verify_greedy",
        fix="verify through one of those, or resolve the plan without the lossy acceptance "
        "setting",
        field="acceptance",
    ))
