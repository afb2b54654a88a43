"""The argument checks of tree verification under per-request parameters: one q per node,
and the values of the scores it filters.
"""

from __future__ import annotations

import torch

from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import check_probabilities


def check_one_draft(draft: torch.Tensor | None, draft_q: torch.Tensor | None) -> None:
    """SR929 when both the draft scores to filter and the filtered q are given."""
    if draft is not None and draft_q is not None:
        raise KernelInputError(
            problem(
                "SR929",
                "both draft (scores the verifier filters) and draft_q (the q the children were "
                "drawn from, read as given) were passed: they name two q for one node",
                accepted="draft=, or draft_q=, or neither (the target-only rule)",
                fix="pass draft_q= when the drafter returns its filtered q (Medusa's "
                "draft_probs), draft= when it returns logits (EAGLE's draft_logits)",
                field="draft_q",
            )
        )


def check_score_values(
    target: torch.Tensor, draft: torch.Tensor | None, draft_q: torch.Tensor | None, *,
    probabilities: bool,
) -> None:
    """SR904 on the target's and the draft's scores (probability rows, or logit rows with a
    finite maximum: `specreg.kernels.chain_params.checks.check_scores`), and on `draft_q`
    (probability rows, all-zero rows allowed: the target-only rule there). Reads the data."""
    from specreg.kernels.chain_params.checks import check_scores

    for name, scores in (("target", target), ("draft", draft)):
        if scores is None:
            continue
        if probabilities:
            check_probabilities(name, scores, allow_zero_rows=name == "draft")
        else:
            check_scores(name, scores)
    if draft_q is not None:
        check_probabilities("draft_q", draft_q, allow_zero_rows=True)
