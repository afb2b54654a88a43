"""The plain per-request rules of chain verification, as loops (the test oracle).

Greedy (from logits or from a precomputed argmax), classic chain rejection sampling and the
target-only rule, with ragged `verify_lens`, one request and one position at a time, in plain
Python over `.tolist()` values. The sampling rules take the same inputs as the kernels
(`ChainSamplingInputs`), so the tokens are comparable exactly: the acceptance test
`coin * q(x) < p(x)` is evaluated in float32 (as the kernels do), the weights of the draw are
float32 values, and the draw is the two-level exponential race on the random stream keyed by
(request key, role, absolute position of the stopping row)
(`specreg.kernels.sampling.reference.block_race_reference`).
"""

from __future__ import annotations

import torch

from specreg.kernels.argmax.reference import row_argmax_reference
from specreg.kernels.chain.types import ChainSamplingInputs, ChainVerifyResult
from specreg.kernels.random_stream.reference import draw_lanes
from specreg.kernels.random_stream.types import RESIDUAL_ROLE, SAMPLE_ROLE
from specreg.kernels.sampling.reference import block_race_reference, f32, residual_reference


def limit_of(verify_lens: list[int] | None, r: int, n: int) -> int:
    """How many drafts request r may accept: min(verify_len, n) - 1, at least 0."""
    if verify_lens is None:
        return n - 1
    return min(max(verify_lens[r] - 1, 0), n - 1)


def result_of(rows: list[tuple[list[int], int, int]], n: int) -> ChainVerifyResult:
    """Per request (drafts, accept_len, bonus): the result tensors."""
    output = []
    for drafts, accept, bonus in rows:
        output.append(drafts[:accept] + [bonus] + [-1] * (n - accept - 1))
    return ChainVerifyResult(
        accept_len=torch.tensor([a for _, a, _ in rows], dtype=torch.int32),
        bonus=torch.tensor([bonus for _, _, bonus in rows], dtype=torch.int64),
        output_tokens=torch.tensor(output, dtype=torch.int64).reshape(len(rows), n),
    )


def _lens(verify_lens: torch.Tensor | None) -> list[int] | None:
    return None if verify_lens is None else [int(v) for v in verify_lens.tolist()]


def verify_chain_greedy_from_predict_reference(
    candidates: torch.Tensor, target_predict: torch.Tensor, *, verify_lens: torch.Tensor | None
) -> ChainVerifyResult:
    """Accept draft i while it equals predict[i] (a -1 draft never matches); the bonus is the
    prediction at the first mismatch or at the verify limit."""
    b, n = candidates.shape
    lens = _lens(verify_lens)
    rows = []
    for r in range(b):
        drafts = [int(t) for t in candidates[r, 1:].tolist()]
        predict = [int(t) for t in target_predict[r].tolist()]
        limit = limit_of(lens, r, n)
        accept = 0
        while accept < limit and drafts[accept] >= 0 and drafts[accept] == predict[accept]:
            accept += 1
        rows.append((drafts, accept, predict[accept]))
    return result_of(rows, n)


def verify_chain_greedy_reference(
    candidates: torch.Tensor, target_logits: torch.Tensor, *, verify_lens: torch.Tensor | None
) -> ChainVerifyResult:
    """The greedy rule on logits: the prediction of row i is its argmax (torch.argmax's rule:
    ties to the lowest index, a NaN wins)."""
    b, n = candidates.shape
    predict = [row_argmax_reference(target_logits[r]).tolist() for r in range(b)]
    return verify_chain_greedy_from_predict_reference(
        candidates, torch.tensor(predict, dtype=torch.int64).reshape(b, n),
        verify_lens=verify_lens,
    )


def emit_reference(
    p_row: list[float], q_row: list[float] | None, excluded: int, rejected: bool, key: int,
    position: int,
) -> int:
    """The emitted token at absolute `position`: after a rejection, from max(p - q, 0) (or p
    without `excluded`, the target-only rule) by the race in the RESIDUAL role; a residual
    without mass draws from p in that role; without a rejection, from p in the SAMPLE role."""
    weights = residual_reference(p_row, q_row, excluded) if rejected else p_row
    role = RESIDUAL_ROLE if rejected else SAMPLE_ROLE
    return block_race_reference(weights, draw_lanes(key, role, position))


def verify_chain_sampling_reference(inputs: ChainSamplingInputs) -> ChainVerifyResult:
    """Classic chain rejection sampling (target-only when `draft_probs` is None), per request:
    accept draft x of row i iff it is a valid id and coin_i * q_i(x) < p_i(x) (q(x) = 1 for the
    target-only rule), stop at the first rejection or the verify limit, then draw the emitted
    token on the request's stream (`emit_reference`)."""
    candidates, target, draft = inputs.candidates, inputs.target_probs, inputs.draft_probs
    b, n, vocab = target.shape
    lens = _lens(inputs.verify_lens)
    rows = []
    for r in range(b):
        drafts = [int(t) for t in candidates[r, 1:].tolist()]
        p = target[r].to(torch.float32).tolist()
        q = None if draft is None else draft[r].to(torch.float32).tolist()
        coins = inputs.coins[r].to(torch.float32).tolist()
        limit = limit_of(lens, r, n)
        accept = 0
        while accept < limit:
            x = drafts[accept]
            if not 0 <= x < vocab:
                break
            q_x = 1.0 if q is None else q[accept][x]
            if not f32(coins[accept] * q_x) < p[accept][x]:
                break
            accept += 1
        rejected = accept < limit
        excluded = drafts[accept] if rejected else -1
        q_row = None if q is None or not rejected else q[accept]
        key, position = int(inputs.keys[r]), int(inputs.positions[r]) + accept
        rows.append(
            (drafts, accept, emit_reference(p[accept], q_row, excluded, rejected, key, position))
        )
    return result_of(rows, n)


def verify_chain_invariant_reference(inputs: ChainSamplingInputs) -> ChainVerifyResult:
    """The drafter-invariant rule per request: the target's token at row i is the race of p_i
    in the SAMPLE role at position positions + i; accept drafts while they equal it, then emit
    the first target token no draft matched."""
    candidates, target = inputs.candidates, inputs.target_probs
    b, n, _ = target.shape
    lens = _lens(inputs.verify_lens)
    rows = []
    for r in range(b):
        drafts = [int(t) for t in candidates[r, 1:].tolist()]
        p = target[r].to(torch.float32).tolist()
        key, position = int(inputs.keys[r]), int(inputs.positions[r])
        limit = limit_of(lens, r, n)
        accept = 0
        while True:
            token = block_race_reference(p[accept], draw_lanes(key, SAMPLE_ROLE, position + accept))
            if accept < limit and drafts[accept] == token:
                accept += 1
                continue
            break
        rows.append((drafts, accept, token))
    return result_of(rows, n)
