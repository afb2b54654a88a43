"""Input validation of the sampling-parameter chain path for logit inputs (raw scores)."""

from __future__ import annotations

import torch

from specreg.errors import KernelInputError, problem
from specreg.kernels.chain.checks import (
    check_coin_values,
    check_position_values,
    verified_positions,
)
from specreg.kernels.checks import check_index_range


def check_scores(name: str, scores: torch.Tensor, rows: torch.Tensor | None = None) -> None:
    """Every (verified) row of raw scores has a finite maximum: no NaN, no +inf, not all -inf.
    One reading pass; only a [b, n] temporary."""
    if scores.numel() == 0:
        return
    top = scores.amax(-1)
    if rows is not None:
        top = top[rows]
    if not bool(torch.isfinite(top).all()):
        raise _bad_scores(name, f"{name} has a verified row with NaN, +inf or only -inf scores")


def _bad_scores(name: str, message: str) -> KernelInputError:
    return KernelInputError(
        problem(
            "SR904",
            message,
            accepted="finite logits (-inf marks a masked token; every row keeps one finite)",
            fix=f"check the model output that produced {name}",
            field=name,
        )
    )


def check_read_scores(
    name: str, maxima: torch.Tensor, flat: torch.Tensor, index: torch.Tensor, width: int
) -> None:
    """The CPU default's check of the logit rows the rule reads, from what it computes anyway:
    `maxima` [k] are the rows' largest scaled scores (the filter statistics' shift, max of
    scores / T, or the value at a greedy row's argmax, which points at a NaN when the row holds
    one), rows `index` [k] of `flat` [b * width, V] (the flat view of `name`). A row whose
    maximum is not finite is checked exactly (`check_scores`' rule on the raw row: a scaled
    maximum may overflow where the raw one does not)."""
    bad = ~torch.isfinite(maxima)
    if not bool(bad.any()):
        return
    for k in bad.nonzero().flatten().tolist():
        row = int(index[k])
        if not bool(torch.isfinite(flat[row].amax())):
            r, i = divmod(row, width)
            raise _bad_scores(name, f"{name}[{r}, {i}] (a row the rule reads) has NaN, +inf or "
                              "only -inf scores")


def check_score_values(
    candidates: torch.Tensor,
    target: torch.Tensor,
    draft: torch.Tensor | None,
    verify_lens: torch.Tensor | None,
    coins: torch.Tensor | None,
    positions: torch.Tensor | None,
    vocab: int,
    *,
    scores: bool = True,
) -> None:
    """Value checks for logit inputs: lengths, the verified token ids (-1 padding past a
    request's length is allowed), finite rows (unless `scores=False`: the rule checks the rows
    it reads, `check_read_scores`), coins in [0, 1)."""
    b, n = candidates.shape
    if verify_lens is not None:
        check_index_range("verify_lens", verify_lens, 1, n + 1)
    verified = verified_positions(verify_lens, b, n, candidates.device)
    check_index_range("candidates", candidates[verified], 0, vocab)
    if scores:
        check_scores("target", target, verified)
    if scores and draft is not None and n > 1:
        check_scores("draft", draft, verified[:, 1:])
    check_coin_values(coins)
    check_position_values(positions)
