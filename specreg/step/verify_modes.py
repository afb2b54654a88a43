"""Per-request verify modes: one batch in which some requests ask for the drafter-invariant rule
and the others for the standard rejection rule.

A sampling call's `invariant=` is None (the plan's `verify_mode`), a bool (the whole batch), or
a bool tensor [b] (request r runs the invariant rule iff `invariant[r]`). `requested_modes`
checks it and reduces a tensor that is all True or all False to that bool, so a uniform batch
runs one kernel. A mixed batch runs both rules on the whole batch and `merge_by_request` takes
each request's row from the result of the rule it asked for. That is exact, not an
approximation: no draw of either rule depends on the request's row or on the other requests
(every draw is keyed by the request's key and absolute position), so a request's row of a
whole-batch result is what it would get verified alone. It costs the second rule's pass over
the batch, paid only by mixed batches.
"""

from __future__ import annotations

from typing import Any

import torch

from specreg.errors import KernelInputError, problem
from specreg.contract.protocols import VerifyResult

FIX = "pass invariant=True (or a bool tensor [b], one value per request) for tokens equal to "\
    "plain sampling"


def _refuse(found: str, batch: int) -> KernelInputError:
    return KernelInputError(problem(
        "SR133", f"invariant={found} is not a verify mode",
        accepted=f"None (the plan's verify mode), True, False, or a bool tensor [{batch}] on the "
        "batch's device (one mode per request)",
        fix=FIX, field="invariant",
    ))


def requested_modes(
    invariant: Any, plan_invariant: bool, batch: int, device: torch.device
) -> bool | torch.Tensor:
    """The call's verify modes: a bool for the whole batch, or a bool tensor [batch] that holds
    both values (SR133 for anything else)."""
    if invariant is None:
        return plan_invariant
    if invariant is True or invariant is False:
        return invariant
    if not isinstance(invariant, torch.Tensor):
        raise _refuse(repr(invariant), batch)
    if invariant.dtype != torch.bool or tuple(invariant.shape) != (batch,):
        raise _refuse(f"a {invariant.dtype} tensor of shape {tuple(invariant.shape)}", batch)
    if invariant.device != device:
        raise _refuse(f"a tensor on {invariant.device} (the batch is on {device})", batch)
    if batch == 0 or bool(invariant.all()):
        return True
    if not bool(invariant.any()):
        return False
    return invariant


def _pick(mask: torch.Tensor, chosen: torch.Tensor, other: torch.Tensor) -> torch.Tensor:
    return torch.where(mask.view(-1, *([1] * (chosen.dim() - 1))), chosen, other)


def merge_by_request(
    invariant: torch.Tensor, invariant_result: VerifyResult, standard_result: VerifyResult
) -> VerifyResult:
    """Request r's row of `invariant_result` where `invariant[r]`, else of `standard_result`
    (both results of the same batch and width)."""
    b, width = invariant.shape[0], standard_result.width

    def per_node(found: VerifyResult) -> torch.Tensor | None:
        return None if found.predicts is None else found.predicts.view(b, width)

    predicts = None
    if invariant_result.predicts is not None or standard_result.predicts is not None:
        chosen, other = per_node(invariant_result), per_node(standard_result)
        predicts = _pick(invariant, chosen, other).reshape(b * width)
    errors = [found.param_error for found in (invariant_result, standard_result)]
    param_error = None
    if any(e is not None for e in errors):
        chosen, other = (torch.zeros(b, dtype=torch.bool, device=invariant.device)
                         if e is None else e for e in errors)  # fmt: skip
        param_error = _pick(invariant, chosen, other)
    return VerifyResult(
        num_accepted=_pick(invariant, invariant_result.num_accepted,
                           standard_result.num_accepted),
        output_tokens=_pick(invariant, invariant_result.output_tokens,
                            standard_result.output_tokens),
        bonus=_pick(invariant, invariant_result.bonus, standard_result.bonus),
        width=width,
        accepted_index=_pick(invariant, invariant_result.accepted_index,
                             standard_result.accepted_index),
        predicts=predicts, param_error=param_error, acceptance=standard_result.acceptance,
    )
