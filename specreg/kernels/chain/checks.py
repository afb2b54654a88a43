"""Input validation of the chain verifiers: every check runs before any kernel launches.

Shape, dtype and device checks always run; checks that read tensor data (token ids, NaN,
probability values, coins) run on CPU by default and on GPU only with `check_values=True`.
"""

from __future__ import annotations

import torch

from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    INDEX_DTYPES,
    check_dtype,
    check_index_range,
    check_probabilities,
    check_same_device,
    check_shape,
    check_tensor,
    should_check_values,
)


def bad_shape(name: str, message: str, accepted: str) -> KernelInputError:
    return KernelInputError(
        problem(
            "SR900",
            f"{name} {message}",
            accepted=accepted,
            fix=f"pass {name} with the shape the chain contract requires",
            field=name,
        )
    )


def check_no_nan(name: str, tensor: torch.Tensor) -> None:
    if bool(torch.isnan(tensor).any()):
        raise KernelInputError(
            problem(
                "SR904",
                f"{name} holds NaN",
                accepted="finite values (or -inf for masked logits)",
                fix=f"check the model output that produced {name}",
                field=name,
            )
        )


def check_candidates(candidates: torch.Tensor) -> tuple[int, int]:
    """candidates [b, n] with n >= 1 (an index dtype); returns (b, n)."""
    check_shape("candidates", candidates, (None, None))
    check_dtype("candidates", candidates, INDEX_DTYPES)
    b, n = candidates.shape
    if n < 1:
        raise bad_shape("candidates", "has no anchor column (n = 0)", "shape [b, n] with n >= 1")
    return b, n


def check_verify_lens(verify_lens: torch.Tensor | None, b: int) -> None:
    if verify_lens is not None:
        check_shape("verify_lens", verify_lens, (b,))
        check_dtype("verify_lens", verify_lens, INDEX_DTYPES)


def check_chain(
    candidates: torch.Tensor,
    target: torch.Tensor,
    target_name: str,
    *,
    verify_lens: torch.Tensor | None,
    draft_probs: torch.Tensor | None = None,
    coins: torch.Tensor | None = None,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    probabilities: bool,
    check_values: bool | None,
) -> tuple[int, int, int]:
    """Every check before launch; returns (b, n, V)."""
    b, n = check_candidates(candidates)
    check_shape(target_name, target, (b, n, None))
    check_dtype(target_name, target, FLOAT_DTYPES)
    vocab = target.shape[-1]
    if vocab < 1:
        raise bad_shape(target_name, "has an empty vocab dimension", "shape [b, n, V] with V >= 1")
    if draft_probs is not None:
        check_shape("draft_probs", draft_probs, (b, n - 1, vocab))
        check_dtype("draft_probs", draft_probs, FLOAT_DTYPES)
    check_verify_lens(verify_lens, b)
    if coins is not None:
        check_tensor("coins", coins)
        if coins.dim() != 2 or coins.shape[0] != b or coins.shape[1] < n - 1:
            raise bad_shape(
                "coins", f"has shape {list(coins.shape)}", f"shape [{b}, k] with k >= {n - 1}"
            )
        check_dtype("coins", coins, FLOAT_DTYPES)
    check_stream_keys(keys, positions, b)
    device = check_same_device(
        candidates=candidates,
        **{target_name: target},
        draft_probs=draft_probs,
        verify_lens=verify_lens,
        coins=coins,
        keys=keys,
        positions=positions,
    )
    if not should_check_values(device, check_values):
        return b, n, vocab

    check_position_values(positions)
    if verify_lens is not None:
        check_index_range("verify_lens", verify_lens, 1, n + 1)
    verified = verified_positions(verify_lens, b, n, device)
    check_index_range("candidates", candidates[verified], 0, vocab)
    if not probabilities:
        check_no_nan(target_name, target)
        return b, n, vocab
    target_mass = check_probabilities(target_name, target, allow_zero_rows=True)
    if bool((target_mass[verified] <= 0).any()):
        raise KernelInputError(
            problem(
                "SR904",
                f"{target_name} has a verified row whose probabilities sum to zero",
                accepted="rows with positive total mass at every verified position",
                fix="check the temperature and the top-k/top-p filtering that produced the row",
                field=target_name,
            )
        )
    if draft_probs is not None:
        draft_mass = check_probabilities("draft_probs", draft_probs, allow_zero_rows=True)
        if bool((draft_mass[verified[:, 1:]] <= 0).any()):
            raise KernelInputError(
                problem(
                    "SR904",
                    "draft_probs has an all-zero row for a verified draft; no draft can be "
                    "sampled from an empty distribution",
                    accepted="each verified row of draft_probs is the distribution its draft "
                    "was sampled from",
                    fix="pass the drafter's q, or, for a drafter without one, use "
                    "verify_chain_target_only (draft_probs=None)",
                    field="draft_probs",
                )
            )
    check_coin_values(coins)
    return b, n, vocab


def check_from_predict(
    candidates: torch.Tensor,
    target_predict: torch.Tensor,
    *,
    verify_lens: torch.Tensor | None,
    vocab_size: int | None,
    check_values: bool | None,
) -> None:
    """The checks of `verify_chain_greedy_from_predict` (token ids only with `vocab_size`)."""
    b, n = check_candidates(candidates)
    check_shape("target_predict", target_predict, (b, n))
    check_dtype("target_predict", target_predict, INDEX_DTYPES)
    check_verify_lens(verify_lens, b)
    device = check_same_device(
        candidates=candidates, target_predict=target_predict, verify_lens=verify_lens
    )
    if should_check_values(device, check_values):
        if verify_lens is not None:
            check_index_range("verify_lens", verify_lens, 1, n + 1)
        if vocab_size is not None:  # positions past a request's verify_lens may hold -1
            verified = verified_positions(verify_lens, b, n, device)
            check_index_range("candidates", candidates[verified], 0, vocab_size)
            check_index_range("target_predict", target_predict[verified], 0, vocab_size)


def check_stream_keys(
    keys: torch.Tensor | None, positions: torch.Tensor | None, b: int
) -> None:
    """keys and positions: int tensors [b] (the request keys and the absolute output position of
    each request's row 0), when given."""
    for name, values in (("keys", keys), ("positions", positions)):
        if values is not None:
            check_shape(name, values, (b,))
            check_dtype(name, values, INDEX_DTYPES)


def check_position_values(positions: torch.Tensor | None) -> None:
    """Positions are absolute output positions: >= 0 (reads the data)."""
    if positions is not None and bool((positions < 0).any()):
        raise KernelInputError(
            problem(
                "SR904",
                "positions holds a negative value",
                accepted="each request's absolute output position of its first verified row, "
                ">= 0",
                fix="pass the number of tokens each request has already emitted",
                field="positions",
            )
        )


def check_coin_values(coins: torch.Tensor | None) -> None:
    """Acceptance coins given by the caller lie in [0, 1) (reads the data)."""
    if coins is not None and bool(((coins < 0) | (coins >= 1) | coins.isnan()).any()):
        raise KernelInputError(
            problem(
                "SR904",
                "coins holds values outside [0, 1)",
                accepted="uniform numbers in [0, 1)",
                fix="leave them out: they come from the random stream keyed by keys= and "
                "positions=",
                field="coins",
            )
        )


def verified_positions(
    verify_lens: torch.Tensor | None, b: int, n: int, device: torch.device
) -> torch.Tensor:
    """bool [b, n]: the positions each request verifies (all n without verify_lens)."""
    if verify_lens is None:
        return torch.ones((b, n), dtype=torch.bool, device=device)
    return torch.arange(n, device=device)[None, :] < verify_lens.to(torch.int64)[:, None]
