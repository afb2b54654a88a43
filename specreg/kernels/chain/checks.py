"""Input validation of the chain verifiers: every check runs before any result is returned.

Shape, dtype and device checks always run, before any kernel launches. Checks that read tensor
data (token ids, NaN, probability values, coins) run on CPU by default and on GPU only with
`check_values=True`, which checks every value before any work. The default on CPU, for the
paths that implement it (the torch path of `verify_chain_sampling`, `verify_chain_target_only`,
`verify_chain_invariant` and `sample_tokens`), checks what the rule reads: the small inputs
([b, n]: token ids, verify_lens, positions, coins) in full before any work, and the
probabilities the rule reads in the pass that reads them (`check_drafted_values`,
`bits_min`, `rows_look_valid`, `check_read_rows`), raising before any result.
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


def check_reached_nan(
    name: str, maxima: torch.Tensor, requests: torch.Tensor, position: int | torch.Tensor
) -> None:
    """Greedy's check of what it reads: `maxima` [k] are the values at the `row_argmax` of row
    `position` (an int, or one per request [k]) of `requests` [k] of `name`. The argmax of a
    row holding NaN is its first NaN, so the rows' NaN are found by reading these k values."""
    found = torch.isnan(maxima)
    if bool(found.any()):
        k = int(found.nonzero()[0, 0])
        r = int(requests[k])
        i = position if isinstance(position, int) else int(position[k])
        raise KernelInputError(
            problem(
                "SR904",
                f"{name}[{r}, {i}] holds NaN (a row request {r} reaches: its argmax is read)",
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
    all_rows: bool = True,
) -> tuple[int, int, int]:
    """Every check before launch; returns (b, n, V). `all_rows=False` leaves the values of the
    [b, n, V] inputs to the rule (it checks the values it reads: `check_read_rows`,
    `check_reached_nan`); the [b, n] inputs are checked here either way."""
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
        if all_rows:
            check_no_nan(target_name, target)
        return b, n, vocab
    if all_rows:
        check_probability_rows(target, target_name, draft_probs, verified)
    check_coin_values(coins)
    return b, n, vocab


def check_probability_rows(
    target: torch.Tensor,
    target_name: str,
    draft_probs: torch.Tensor | None,
    verified: torch.Tensor,
) -> None:
    """Every value of `target` [b, n, V] and `draft_probs` [b, n-1, V] finite and >= 0, every
    verified row with positive mass (two reading passes of each tensor)."""
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
            raise empty_draft_row()


def empty_draft_row(where: str = "") -> KernelInputError:
    """SR904 for an all-zero q row at a verified draft (`where` names it)."""
    return KernelInputError(
        problem(
            "SR904",
            f"draft_probs has an all-zero row for a verified draft{where}; no draft can be "
            "sampled from an empty distribution",
            accepted="each verified row of draft_probs is the distribution its draft "
            "was sampled from",
            fix="pass the drafter's q, or, for a drafter without one, use "
            "verify_chain_target_only (draft_probs=None)",
            field="draft_probs",
        )
    )


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


# ------------------------------------------------------------------ what the rule reads
# The default on CPU (check_values=None) for the paths that implement it: the rule checks each
# probability it reads, in the pass that reads it, and raises before returning any result.

#: The bits of 2**103: rows whose largest value lies below it have a finite float32 sum for
#: any V < 2**24 (with room for rounding), so the exact row sums are computed only above it
#: (for floats >= 0 the int32 order of the bits is the order of the values).
SAFE_SUM_BITS = (127 + 103) << 23


def _bad_values(name: str, where: str, fix: str) -> KernelInputError:
    return KernelInputError(
        problem(
            "SR904",
            f"{name}{where} holds NaN, infinite or negative probabilities",
            accepted="finite values >= 0",
            fix=fix,
            field=name,
        )
    )


_PROBS_FIX = "compute probabilities with torch.softmax in float32 from finite logits"


def check_drafted_values(
    p_x: torch.Tensor,
    q_x: torch.Tensor | None,
    checked: torch.Tensor,
    drafts: torch.Tensor,
    draft_probs: torch.Tensor | None,
) -> None:
    """`p_x` and `q_x` [b, gamma] (any float dtype; q_x None for the target-only rule): the
    probabilities of the drafted tokens `drafts` [b, gamma] that the acceptance test reads,
    p(x) of target_probs and q(x) of `draft_probs`. Where `checked` (the verified drafts with a
    valid token id) they are finite and >= 0, and a q row whose q(x) is 0 is read whole: its
    values, and its mass (an all-zero q row is not a target-only signal). Drafts sampled from
    q have q(x) > 0, so no row is read in practice. One host synchronisation."""
    ok = (p_x >= 0) & (p_x < float("inf"))  # NaN fails both
    if q_x is not None:
        ok &= (q_x >= 0) & (q_x < float("inf"))
        zero = checked & (q_x == 0)
        bad, read_rows = torch.stack(((checked & ~ok).any(), zero.any())).tolist()
    else:
        bad, read_rows = bool((checked & ~ok).any()), False
    if bad:
        for name, values in (("target_probs", p_x), ("draft_probs", q_x)):
            if values is None:
                continue
            wrong = checked & ~((values >= 0) & (values < float("inf")))
            if bool(wrong.any()):
                r, i = (int(v) for v in wrong.nonzero()[0])
                raise _bad_values(
                    name, f"[{r}, {i}, {int(drafts[r, i])}] (the probability of request {r}'s "
                    f"draft at position {i + 1}, which the acceptance test reads)", _PROBS_FIX,
                )
    if read_rows and draft_probs is not None and q_x is not None:
        for r, i in (checked & (q_x == 0)).nonzero().tolist():
            mass = check_probabilities(f"draft_probs[{r}, {i}]", draft_probs[r, i],
                                       allow_zero_rows=True)
            if bool(mass <= 0):
                raise empty_draft_row(f" (draft_probs[{r}, {i}], request {r}'s draft at "
                                      f"position {i + 1})")


def bits_min(rows: torch.Tensor, out: torch.Tensor) -> None:
    """`out` int32 [k]: the least int32 reading of each row of float32 `rows` [k, V]
    (contiguous, just read by the rule, in cache): negative iff the row holds a sign bit
    (a negative value, -inf, a negative NaN, or -0.0)."""
    torch.amin(rows.view(torch.int32), dim=-1, out=out)


def bits_range(rows: torch.Tensor, low: torch.Tensor, high: torch.Tensor) -> None:
    """`bits_min` into `low` and the greatest int32 reading into `high`: a float32 is finite and
    >= 0 iff its bits, read as int32, lie in [0, 0x7F800000), the bits of +inf. (Two
    reductions: torch's CPU aminmax along a dim is 8x slower than amin and amax together.)"""
    bits = rows.view(torch.int32)
    torch.amin(bits, dim=-1, out=low)
    torch.amax(bits, dim=-1, out=high)


def rows_look_valid(
    masses: torch.Tensor, low: torch.Tensor, high: torch.Tensor | None = None
) -> torch.Tensor:
    """bool [k]: rows that pass the quick test, from what the rule computed as it read them:
    the block `masses` [k, blocks] it draws from (positive mass), the int32 minima `low` [k] of
    their rows (no sign bit) and either the maxima `high` [k] (every value finite, and small
    enough for no float32 sum to overflow) or, without them, the masses' sums (NaN, inf and
    overflow reach them; `masses` must then be the rows' own). A row that fails it gets the
    exact check (`check_read_rows`)."""
    ok = (low >= 0) & (masses.amax(-1) > 0)
    if high is None:
        return ok & torch.isfinite(masses.sum(-1))
    return ok & (high < SAFE_SUM_BITS)


#: One input of the rows a rule read: (name, flat [N, V] view of `name` [b, width, V], the
#: flat index [k] of each row read, width, whether the row must have positive mass).
ReadSource = tuple[str, torch.Tensor, torch.Tensor, int, bool]


def check_read_rows(ok: torch.Tensor, role: str, *sources: ReadSource) -> None:
    """Raise SR904 for the first row read that is invalid, among those `ok` [k] (from
    `rows_look_valid`) did not pass: checked exactly, in its input's dtype, as
    `check_probabilities` checks a row (values finite and >= 0, a finite float32 sum, and,
    where required, positive mass). A row that failed only the quick test's bound is valid.
    `role` says why the rule reads the rows (for the message)."""
    if bool(ok.all()):
        return
    for k in (~ok).nonzero().flatten().tolist():
        for name, flat, index, width, needs_mass in sources:
            row = flat[int(index[k])]
            total = row.sum(dtype=torch.float32)
            r, i = divmod(int(index[k]), width)
            where = f"[{r}, {i}] ({role.format(r=r)})"
            if not bool(torch.isfinite(total)) or bool((row < 0).any()):
                raise _bad_values(name, where, _PROBS_FIX)
            if needs_mass and not bool(total > 0):
                raise KernelInputError(
                    problem(
                        "SR904",
                        f"{name}{where} has probabilities that sum to zero",
                        accepted="rows with positive total mass at every position the rule "
                        "draws from",
                        fix="check the temperature and the top-k/top-p filtering that "
                        "produced the row",
                        field=name,
                    )
                )
