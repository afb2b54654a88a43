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
        raise KernelInputError(
            problem(
                "SR904",
                f"{name} has a verified row with NaN, +inf or only -inf scores",
                accepted="finite logits (-inf marks a masked token; every row keeps one finite)",
                fix=f"check the model output that produced {name}",
                field=name,
            )
        )


def check_score_values(
    candidates: torch.Tensor,
    target: torch.Tensor,
    draft: torch.Tensor | None,
    verify_lens: torch.Tensor | None,
    coins: torch.Tensor | None,
    positions: torch.Tensor | None,
    vocab: int,
) -> None:
    """Value checks for logit inputs: lengths, the verified token ids (-1 padding past a
    request's length is allowed), finite rows, coins in [0, 1)."""
    b, n = candidates.shape
    if verify_lens is not None:
        check_index_range("verify_lens", verify_lens, 1, n + 1)
    verified = verified_positions(verify_lens, b, n, candidates.device)
    check_index_range("candidates", candidates[verified], 0, vocab)
    check_scores("target", target, verified)
    if draft is not None and n > 1:
        check_scores("draft", draft, verified[:, 1:])
    check_coin_values(coins)
    check_position_values(positions)
