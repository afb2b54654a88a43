"""Chain verification: greedy leading match and lossless chain rejection sampling.

Shared by every chain drafter (DSpark/DFlash blocks, EAGLE with topk=1, n-gram drafters).

Layout. `candidates` [b, n] (int32/int64): column 0 is the anchor (the last committed token),
columns 1..n-1 are the gamma = n-1 drafts. Row i of the target (`target_logits[:, i]`,
`target_probs[:, i]`, [b, n, V]) is the target's distribution for the token FOLLOWING
`candidates[:, i]`. `draft_probs[:, i]` ([b, n-1, V]) is q, the distribution draft
`candidates[:, i+1]` was sampled from.

Rules.
- Greedy: accept drafts while `candidates[:, i+1] == argmax(target_logits[:, i])` (ties go to the
  lowest index, like torch.argmax); the bonus is the argmax of the row after the accepted drafts.
- Chain sampling (classic speculative sampling): accept draft x of row i iff
  `coin_i * q(x) < p(x)` (strict: q(x) = 0 < p(x) accepts, p(x) = 0 never accepts). At the first
  rejection the correction token is drawn from `norm(max(p - q, 0))` of that row; if every draft
  is accepted the bonus is drawn from p of the last verified row. Both draws use the request's
  final coin by inverse CDF. This emits tokens distributed exactly as the target, provided q is
  the distribution the drafts were sampled from.
- Target only (`verify_chain_target_only`, or `draft_probs=None`): for drafters that expose no q
  (n-gram, greedy drafters, or a q that was not kept). Accept x with probability p(x)
  (`coin < p(x)`); on rejection draw from p with x's mass removed. This is the classic rule with
  q = one-hot(x), and it is lossless whatever produced x (given x, the emitted token is
  distributed as p). It is also SGLang's target-only tree rule with thresholds 1.0 on a chain.
- All-zero q rows are NOT a "target only" signal: no draft can be sampled from an empty
  distribution, and the classic rule would then accept every x with p(x) > 0, which is not
  lossless. The CPU path rejects them (SR904, pointing at the target-only rule); on GPU (no value
  checks by default) the formula is applied as written.
- Ragged verify (`verify_lens` [b], DSpark): request r verifies only its first verify_lens[r]
  positions, exactly as if its chain had length verify_lens[r]: accept_len <= verify_lens[r] - 1
  and the bonus comes from the row at the capped position (argmax, or a draw from p).
- Rounding guard: if the residual `max(p - q, 0)` has no mass (impossible after an exact
  rejection, possible with rounding or invalid GPU inputs), the token is drawn from p instead.
- Invalid token ids reaching the GPU path unchecked are never accepted and never read out of
  bounds (loads are masked); `check_values=True` raises SR903 instead (it synchronises).

Implementations: `*_torch` (vectorised over the batch; CPU path and oracle) and `*_triton` (one
program per request; the vocab is streamed in BLOCK_V tiles with int64 offsets; residual sampling
makes two passes: total mass, then inverse CDF; no [b, n, V] temporaries, no host synchronisation).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Literal

import attrs
import torch

from specreg.backend import select_backend
from specreg.errors import KernelInputError, problem
from specreg.kernels.argmax import row_argmax
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
from specreg.kernels.sampling import (
    cpu_row_chunks,
    inverse_cdf_from_cdf,
    inverse_cdf_sample,
    residual_weights,
    take_rows_float32,
    uniform_coins,
)
from specreg.memory import PER_REQUEST, Buffer, verify_result_buffers
from specreg.protocols import VerifyResult

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is optional
    triton = None
    tl = None

if TYPE_CHECKING:
    from specreg.kernels.sampling_params import SamplingParams

BackendChoice = Literal["torch", "triton"] | None

#: Default vocab tile of the Triton kernels.
DEFAULT_BLOCK_V = 2048


@attrs.frozen(kw_only=True)
class ChainVerifyResult:
    """Outcome of verifying one chain per request.

    accept_len: int32 [b], accepted drafts (0..n-1), not counting the bonus.
    bonus: int64 [b], the token emitted after the accepted drafts (correction or bonus).
    output_tokens: int64 [b, n], the accepted drafts, then the bonus, then -1.
    param_error: bool [b] when verified with sampling parameters: requests whose parameters were
    invalid (reachable only with value checks off, e.g. on GPU); they accept nothing and emit -1.
    """

    accept_len: torch.Tensor
    bonus: torch.Tensor
    output_tokens: torch.Tensor
    param_error: torch.Tensor | None = None

    @property
    def num_emitted(self) -> torch.Tensor:
        """Tokens emitted per request: accept_len + 1."""
        return self.accept_len + 1


# --------------------------------------------------------------------------------------------
# Validation


def _bad_shape(name: str, message: str, accepted: str) -> KernelInputError:
    return KernelInputError(
        problem(
            "SR900",
            f"{name} {message}",
            accepted=accepted,
            fix=f"pass {name} with the shape the chain contract requires",
            field=name,
        )
    )


def _check_no_nan(name: str, tensor: torch.Tensor) -> None:
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


def _check_chain(
    candidates: torch.Tensor,
    target: torch.Tensor,
    target_name: str,
    *,
    verify_lens: torch.Tensor | None,
    draft_probs: torch.Tensor | None = None,
    coins: torch.Tensor | None = None,
    final_coins: torch.Tensor | None = None,
    offsets: torch.Tensor | None = None,
    probabilities: bool,
    check_values: bool | None,
) -> tuple[int, int, int]:
    """Every check before launch; returns (b, n, V)."""
    check_shape("candidates", candidates, (None, None))
    check_dtype("candidates", candidates, INDEX_DTYPES)
    b, n = candidates.shape
    if n < 1:
        raise _bad_shape("candidates", "has no anchor column (n = 0)", "shape [b, n] with n >= 1")
    check_shape(target_name, target, (b, n, None))
    check_dtype(target_name, target, FLOAT_DTYPES)
    vocab = target.shape[-1]
    if vocab < 1:
        raise _bad_shape(target_name, "has an empty vocab dimension", "shape [b, n, V] with V >= 1")
    if draft_probs is not None:
        check_shape("draft_probs", draft_probs, (b, n - 1, vocab))
        check_dtype("draft_probs", draft_probs, FLOAT_DTYPES)
    if verify_lens is not None:
        check_shape("verify_lens", verify_lens, (b,))
        check_dtype("verify_lens", verify_lens, INDEX_DTYPES)
    if coins is not None:
        check_tensor("coins", coins)
        if coins.dim() != 2 or coins.shape[0] != b or coins.shape[1] < n - 1:
            raise _bad_shape(
                "coins", f"has shape {list(coins.shape)}", f"shape [{b}, k] with k >= {n - 1}"
            )
        check_dtype("coins", coins, FLOAT_DTYPES)
    if final_coins is not None:
        check_shape("final_coins", final_coins, (b,))
        check_dtype("final_coins", final_coins, FLOAT_DTYPES)
    if offsets is not None:
        check_shape("offsets", offsets, (b,))
        check_dtype("offsets", offsets, INDEX_DTYPES)
    device = check_same_device(
        candidates=candidates,
        **{target_name: target},
        draft_probs=draft_probs,
        verify_lens=verify_lens,
        coins=coins,
        final_coins=final_coins,
        offsets=offsets,
    )
    if not should_check_values(device, check_values):
        return b, n, vocab

    if verify_lens is not None:
        check_index_range("verify_lens", verify_lens, 1, n + 1)
    verified = _verified_positions(verify_lens, b, n, device)
    check_index_range("candidates", candidates[verified], 0, vocab)
    if not probabilities:
        _check_no_nan(target_name, target)
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
    check_coin_values(coins, final_coins)
    return b, n, vocab


def check_coin_values(coins: torch.Tensor | None, final_coins: torch.Tensor | None) -> None:
    """Coins given by the caller lie in [0, 1) (reads the data)."""
    for name, values in (("coins", coins), ("final_coins", final_coins)):
        if values is not None and bool(((values < 0) | (values >= 1) | values.isnan()).any()):
            raise KernelInputError(
                problem(
                    "SR904",
                    f"{name} holds values outside [0, 1)",
                    accepted="uniform numbers in [0, 1)",
                    fix="draw them with specreg.kernels.sampling.uniform_coins, or leave them "
                    "out",
                    field=name,
                )
            )


def _verified_positions(
    verify_lens: torch.Tensor | None, b: int, n: int, device: torch.device
) -> torch.Tensor:
    """bool [b, n]: the positions each request verifies (all n without verify_lens)."""
    if verify_lens is None:
        return torch.ones((b, n), dtype=torch.bool, device=device)
    return torch.arange(n, device=device)[None, :] < verify_lens.to(torch.int64)[:, None]


def _choose_backend(backend: BackendChoice, *tensors: torch.Tensor) -> str:
    if backend is None:
        return select_backend(*tensors)
    if backend not in ("torch", "triton"):
        raise KernelInputError(
            problem(
                "SR904",
                f"backend={backend!r} is not a kernel backend",
                accepted="None (automatic), 'torch' or 'triton'",
                fix="pass backend=None",
                field="backend",
            )
        )
    if backend == "triton" and triton is None:
        raise KernelInputError(
            problem(
                "SR116",
                "backend='triton' but triton is not installed",
                accepted="'torch', or 'triton' with the triton package installed",
                fix="pip install 'specreg[triton]', or pass backend='torch'",
                field="backend",
            )
        )
    return backend


# --------------------------------------------------------------------------------------------
# Torch implementations (vectorised over the batch)


def _limits(verify_lens: torch.Tensor | None, b: int, n: int, device: torch.device) -> torch.Tensor:
    """Per request, how many drafts may be accepted: min(verify_len, n) - 1, at least 0."""
    if verify_lens is None:
        return torch.full((b,), n - 1, dtype=torch.int64, device=device)
    return (verify_lens.to(torch.int64) - 1).clamp(0, n - 1)


def _leading_run(accepted: torch.Tensor) -> torch.Tensor:
    """Length of the leading run of True per row, int64."""
    if accepted.shape[1] == 0:
        return torch.zeros(accepted.shape[0], dtype=torch.int64, device=accepted.device)
    return accepted.to(torch.int64).cumprod(dim=1).sum(dim=1)


def _assemble(
    candidates: torch.Tensor, accept_len: torch.Tensor, bonus: torch.Tensor
) -> ChainVerifyResult:
    b, n = candidates.shape
    columns = torch.arange(n, device=candidates.device)
    drafts = torch.cat(
        [candidates[:, 1:].to(torch.int64), candidates.new_full((b, 1), -1, dtype=torch.int64)],
        dim=1,
    )
    accept = accept_len.to(torch.int64)[:, None]
    output = torch.where(
        columns < accept, drafts, torch.where(columns == accept, bonus[:, None], -1)
    )
    return ChainVerifyResult(
        accept_len=accept_len.to(torch.int32), bonus=bonus.to(torch.int64), output_tokens=output
    )


def verify_chain_greedy_from_predict_torch(
    candidates: torch.Tensor, target_predict: torch.Tensor, *, verify_lens: torch.Tensor | None
) -> ChainVerifyResult:
    b, n = candidates.shape
    limit = _limits(verify_lens, b, n, candidates.device)
    predict = target_predict.to(torch.int64)
    drafts = candidates[:, 1:].to(torch.int64)
    match = (drafts == predict[:, :-1]) & (drafts >= 0)  # a -1 never matches, even a -1
    match &= torch.arange(n - 1, device=candidates.device)[None, :] < limit[:, None]
    accept_len = _leading_run(match)
    bonus = predict.gather(1, accept_len[:, None]).squeeze(1)
    return _assemble(candidates, accept_len, bonus)


def verify_chain_greedy_torch(
    candidates: torch.Tensor, target_logits: torch.Tensor, *, verify_lens: torch.Tensor | None
) -> ChainVerifyResult:
    if target_logits.device.type != "cpu":  # one batched argmax, no host synchronisation
        predict = torch.argmax(target_logits, dim=-1)
        return verify_chain_greedy_from_predict_torch(candidates, predict, verify_lens=verify_lens)
    return _verify_chain_greedy_progressive(candidates, target_logits, verify_lens)


def _verify_chain_greedy_progressive(
    candidates: torch.Tensor, target_logits: torch.Tensor, verify_lens: torch.Tensor | None
) -> ChainVerifyResult:
    """CPU: argmax only the rows a request reaches (its accepted drafts and its bonus row),
    position by position over the still-matching requests. Same result as the batched argmax."""
    b, n = candidates.shape
    limit = _limits(verify_lens, b, n, candidates.device)
    drafts = candidates[:, 1:].to(torch.int64)
    accept_len = torch.zeros(b, dtype=torch.int64)
    bonus = torch.empty(b, dtype=torch.int64)
    active = torch.arange(b)
    gathered = None  # reused: a fresh [k, V] block per position costs page faults
    for i in range(n):
        if active.numel() == 0:
            break
        rows = target_logits[:, i]
        if active.numel() * 2 >= b:  # reading every row beats copying most of them
            predict = row_argmax(rows).index_select(0, active)
        else:
            if gathered is None:
                gathered = rows.new_empty(active.numel(), rows.shape[1])
            predict = row_argmax(torch.index_select(rows, 0, active, out=gathered[: active.numel()]))
        if i < n - 1:
            matched = (drafts[active, i] == predict) & (limit[active] > i)
        else:
            matched = torch.zeros_like(predict, dtype=torch.bool)
        stopped = ~matched
        bonus[active[stopped]] = predict[stopped]
        active = active[matched]
        accept_len[active] = i + 1
    return _assemble(candidates, accept_len, bonus)


def verify_chain_sampling_torch(
    candidates: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    coins: torch.Tensor,
    final_coins: torch.Tensor,
    *,
    verify_lens: torch.Tensor | None,
) -> ChainVerifyResult:
    """Classic rule with `draft_probs`; target-only rule (q one-hot at x) when it is None."""
    b, n, vocab = target_probs.shape
    gamma = n - 1
    device = candidates.device
    limit = _limits(verify_lens, b, n, device)
    drafts = candidates[:, 1:].to(torch.int64)
    valid = (drafts >= 0) & (drafts < vocab)
    safe = drafts.clamp(0, vocab - 1).unsqueeze(-1)
    p_x = target_probs[:, :gamma].gather(-1, safe).squeeze(-1).to(torch.float32)
    if draft_probs is None:
        q_x = torch.ones_like(p_x)
    else:
        q_x = draft_probs.gather(-1, safe).squeeze(-1).to(torch.float32)
    accepted = (coins[:, :gamma].to(torch.float32) * q_x < p_x) & valid
    accepted &= torch.arange(gamma, device=device)[None, :] < limit[:, None]
    accept_len = _leading_run(accepted)

    if device.type != "cpu":
        bonus = _emit_dense(target_probs, draft_probs, drafts, valid, limit, accept_len, final_coins)
    else:
        bonus = _emit_cpu(target_probs, draft_probs, drafts, valid, limit, accept_len, final_coins)
    return _assemble(candidates, accept_len, bonus)


def _take_rows(
    probs: torch.Tensor, row_index: torch.Tensor, requests: torch.Tensor | None = None
) -> torch.Tensor:
    """Float32 rows `probs[requests[k], row_index[k]]` of [b, n, V] as a fresh [k, V] tensor
    (`requests` defaults to every request; one index_select on the flat view when possible)."""
    b, n, vocab = probs.shape
    if requests is None:
        requests = torch.arange(b, device=probs.device)
    try:
        flat = probs.view(b * n, vocab)
    except RuntimeError:
        return probs[requests, row_index].to(torch.float32)
    return flat.index_select(0, requests * n + row_index).to(torch.float32)


def _emit_dense(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    drafts: torch.Tensor,
    valid: torch.Tensor,
    limit: torch.Tensor,
    accept_len: torch.Tensor,
    final_coins: torch.Tensor,
) -> torch.Tensor:
    """The emitted token, computed over every request's row (no host synchronisation)."""
    gamma = drafts.shape[1]
    rows = torch.arange(target_probs.shape[0], device=target_probs.device)
    p_row = _take_rows(target_probs, accept_len)  # [b, V]: the row the emitted token comes from
    if gamma == 0:
        weights = p_row
    else:
        rejected_row = accept_len.clamp(max=gamma - 1)
        if draft_probs is None:
            rejected = torch.where(valid, drafts, -1)[rows, rejected_row]
            residual = residual_weights(p_row, exclude=rejected)
        else:
            residual = residual_weights(p_row, _take_rows(draft_probs, rejected_row))
        weights = torch.where((accept_len >= limit)[:, None], p_row, residual)
    return inverse_cdf_sample(weights, final_coins)


def _emit_cpu(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    drafts: torch.Tensor,
    valid: torch.Tensor,
    limit: torch.Tensor,
    accept_len: torch.Tensor,
    final_coins: torch.Tensor,
) -> torch.Tensor:
    """`_emit_dense` on CPU, in chunks of requests with reused buffers: each request's vocab row
    is read once and stays in cache for the residual, cumsum and search (same values)."""
    b, n, vocab = target_probs.shape
    if b == 0:
        return torch.empty(0, dtype=torch.int64)
    gamma = drafts.shape[1]
    p_flat = _flat_rows(target_probs)
    q_flat = None if draft_probs is None or gamma == 0 else _flat_rows(draft_probs)
    rows = torch.arange(b)
    p_index = rows * n + accept_len
    rejected = accept_len < limit
    excluded = torch.full((b,), -1, dtype=torch.int64)
    q_index = excluded
    if gamma > 0:
        rejected_row = accept_len.clamp(max=gamma - 1)
        q_index = rows * gamma + rejected_row
        excluded = torch.where(valid, drafts, -1)[rows, rejected_row]
        excluded = torch.where(rejected, excluded, -1)
    chunks = cpu_row_chunks(b, vocab)
    size = chunks[0][1] - chunks[0][0]
    p_buf = torch.empty(size, vocab, dtype=torch.float32)
    q_buf = torch.empty_like(p_buf) if q_flat is not None else None
    cdf_buf = torch.empty_like(p_buf)
    bonus = torch.empty(b, dtype=torch.int64)
    for start, stop in chunks:
        p_rows = take_rows_float32(p_flat, p_index[start:stop], p_buf)
        if q_flat is not None:
            q_rows = take_rows_float32(q_flat, q_index[start:stop], q_buf)
            residual = torch.sub(p_rows, q_rows, out=q_rows).clamp_min_(0.0)
            use_p = (~rejected[start:stop] | (residual.sum(-1) <= 0)).nonzero().squeeze(1)
            weights = residual
            if use_p.numel():
                weights[use_p] = p_rows[use_p]
        else:
            weights = p_rows
            hit = (excluded[start:stop] >= 0).nonzero().squeeze(1)
            if hit.numel():
                token = excluded[start:stop][hit]
                kept = weights[hit, token]
                weights[hit, token] = 0.0
                empty = weights[hit].sum(-1) <= 0  # residual without mass: draw from p
                weights[hit[empty], token[empty]] = kept[empty]
        cdf = torch.cumsum(weights, -1, out=cdf_buf[: stop - start])
        bonus[start:stop] = inverse_cdf_from_cdf(weights, cdf, final_coins[start:stop])
    return bonus


def _flat_rows(probs: torch.Tensor) -> torch.Tensor:
    """[b, n, V] as [b * n, V] (a view when the layout allows, else a copy)."""
    return probs.reshape(-1, probs.shape[-1])


# --------------------------------------------------------------------------------------------
# Triton implementations

if triton is not None:

    @triton.jit
    def _row_argmax(row_ptr, stride_v, vocab, BLOCK_V: tl.constexpr):
        """Argmax of one row streamed in tiles; ties go to the lowest index. Returns int64."""
        offs = tl.arange(0, BLOCK_V)
        best_val = tl.max(tl.full([BLOCK_V], float("-inf"), tl.float32), axis=0)
        best_idx = tl.min(tl.zeros([BLOCK_V], tl.int64), axis=0)
        for start in range(0, vocab, BLOCK_V):
            cols = start + offs
            inside = cols < vocab
            values = tl.load(
                row_ptr + cols.to(tl.int64) * stride_v, mask=inside, other=float("-inf")
            ).to(tl.float32)
            tile_max = tl.max(values, axis=0)
            tile_idx = tl.min(
                tl.where(inside & (values == tile_max), cols, vocab), axis=0
            ).to(tl.int64)
            better = tile_max > best_val
            best_val = tl.where(better, tile_max, best_val)
            best_idx = tl.where(better, tile_idx, best_idx)
        return best_idx

    @triton.jit
    def _write_result(
        cand_ptr, stride_cb, stride_cn, accept_ptr, bonus_ptr, out_ptr,
        row, n, accepted, bonus, BLOCK_N: tl.constexpr,
    ):
        j = tl.arange(0, BLOCK_N)
        drafts = tl.load(
            cand_ptr + row * stride_cb + (j + 1).to(tl.int64) * stride_cn,
            mask=(j + 1) < n,
            other=-1,
        ).to(tl.int64)
        minus_one = tl.full([BLOCK_N], -1, tl.int64)
        out = tl.where(j < accepted, drafts, tl.where(j == accepted, bonus, minus_one))
        tl.store(out_ptr + row * n + j, out, mask=j < n)
        tl.store(accept_ptr + row, accepted.to(tl.int32))
        tl.store(bonus_ptr + row, bonus)

    @triton.jit
    def _chain_greedy_kernel(
        cand_ptr, stride_cb, stride_cn,
        logits_ptr, stride_lb, stride_ln, stride_lv,
        vlens_ptr,
        accept_ptr, bonus_ptr, out_ptr,
        n, vocab,
        HAS_VLENS: tl.constexpr, BLOCK_V: tl.constexpr, BLOCK_N: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        limit = row * 0 + (n - 1)
        if HAS_VLENS:
            limit = tl.minimum(tl.maximum(tl.load(vlens_ptr + row).to(tl.int64) - 1, 0), n - 1)
        base = logits_ptr + row * stride_lb
        i = limit * 0
        predict = _row_argmax(base, stride_lv, vocab, BLOCK_V)
        nxt = tl.load(cand_ptr + row * stride_cb + stride_cn, mask=n > 1, other=-1).to(tl.int64)
        go = (i < limit) & (nxt == predict)
        while go:
            i += 1
            predict = _row_argmax(base + i * stride_ln, stride_lv, vocab, BLOCK_V)
            nxt = tl.load(
                cand_ptr + row * stride_cb + (i + 1) * stride_cn, mask=(i + 1) < n, other=-1
            ).to(tl.int64)
            go = (i < limit) & (nxt == predict)
        _write_result(
            cand_ptr, stride_cb, stride_cn, accept_ptr, bonus_ptr, out_ptr,
            row, n, i, predict, BLOCK_N,
        )

    @triton.jit
    def _chain_sampling_kernel(
        cand_ptr, stride_cb, stride_cn,
        p_ptr, stride_pb, stride_pn, stride_pv,
        q_ptr, stride_qb, stride_qn, stride_qv,
        coins_ptr, stride_ub, stride_un,
        final_ptr, stride_f,
        vlens_ptr,
        accept_ptr, bonus_ptr, out_ptr,
        n, vocab,
        HAS_Q: tl.constexpr, HAS_VLENS: tl.constexpr,
        BLOCK_V: tl.constexpr, BLOCK_N: tl.constexpr,
    ):
        row = tl.program_id(0).to(tl.int64)
        limit = row * 0 + (n - 1)
        if HAS_VLENS:
            limit = tl.minimum(tl.maximum(tl.load(vlens_ptr + row).to(tl.int64) - 1, 0), n - 1)
        p_base = p_ptr + row * stride_pb
        q_base = q_ptr + row * stride_qb
        cand_base = cand_ptr + row * stride_cb

        # Acceptance: walk the chain until the first rejection or the verify limit.
        i = limit * 0
        go = i < limit
        while go:
            token = tl.load(cand_base + (i + 1) * stride_cn).to(tl.int64)
            valid = (token >= 0) & (token < vocab)
            safe = tl.where(valid, token, 0)
            p_x = tl.load(p_base + i * stride_pn + safe * stride_pv, mask=valid, other=0.0)
            p_x = p_x.to(tl.float32)
            coin = tl.load(coins_ptr + row * stride_ub + i * stride_un).to(tl.float32)
            if HAS_Q:
                q_x = tl.load(q_base + i * stride_qn + safe * stride_qv, mask=valid, other=0.0)
                accepted = (coin * q_x.to(tl.float32) < p_x) & valid
            else:
                accepted = (coin < p_x) & valid
            i += accepted.to(tl.int64)
            go = accepted & (i < limit)

        # The emitted token: residual of row i after a rejection, p of row i otherwise.
        rejected = i < limit
        p_row = p_base + i * stride_pn
        q_row = q_base + tl.minimum(i, n - 2) * stride_qn
        excluded = tl.load(
            cand_base + (i + 1) * stride_cn, mask=rejected & ((i + 1) < n), other=-1
        ).to(tl.int64)
        offs = tl.arange(0, BLOCK_V)
        zero = tl.sum(tl.zeros([BLOCK_V], tl.float32), axis=0)
        sum_p = zero
        sum_r = zero
        last_p = tl.max(tl.full([BLOCK_V], -1, tl.int64), axis=0)
        last_r = last_p
        for start in range(0, vocab, BLOCK_V):
            cols = (start + offs).to(tl.int64)
            inside = cols < vocab
            pv = tl.load(p_row + cols * stride_pv, mask=inside, other=0.0).to(tl.float32)
            if HAS_Q:
                qv = tl.load(q_row + cols * stride_qv, mask=inside & rejected, other=0.0)
                rv = tl.maximum(pv - qv.to(tl.float32), 0.0)
            else:
                rv = tl.where(cols == excluded, 0.0, pv)
            sum_p += tl.sum(pv, axis=0)
            sum_r += tl.sum(rv, axis=0)
            last_p = tl.maximum(last_p, tl.max(tl.where(pv > 0, cols, -1), axis=0))
            last_r = tl.maximum(last_r, tl.max(tl.where(rv > 0, cols, -1), axis=0))
        use_residual = rejected & (sum_r > 0)
        total = tl.where(use_residual, sum_r, sum_p)
        last = tl.where(use_residual, last_r, last_p)
        threshold = tl.load(final_ptr + row * stride_f).to(tl.float32) * total

        running = zero
        first = tl.min(tl.full([BLOCK_V], vocab, tl.int64), axis=0)
        for start in range(0, vocab, BLOCK_V):
            cols = (start + offs).to(tl.int64)
            inside = cols < vocab
            pv = tl.load(p_row + cols * stride_pv, mask=inside, other=0.0).to(tl.float32)
            if HAS_Q:
                qv = tl.load(q_row + cols * stride_qv, mask=inside & use_residual, other=0.0)
                rv = tl.maximum(pv - qv.to(tl.float32), 0.0)
            else:
                rv = tl.where(cols == excluded, 0.0, pv)
            weights = tl.where(use_residual, rv, pv)
            cdf = tl.cumsum(weights, axis=0) + running
            hit = (cdf > threshold) & (weights > 0)
            first = tl.minimum(first, tl.min(tl.where(hit, cols, vocab), axis=0))
            running += tl.sum(weights, axis=0)
        token = tl.where(first < vocab, first, tl.maximum(last, 0))
        _write_result(
            cand_ptr, stride_cb, stride_cn, accept_ptr, bonus_ptr, out_ptr,
            row, n, i, token, BLOCK_N,
        )


def _outputs(b: int, n: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    return (
        torch.empty(b, dtype=torch.int32, device=device),
        torch.empty(b, dtype=torch.int64, device=device),
        torch.empty((b, n), dtype=torch.int64, device=device),
    )


def _block_v(vocab: int, block_v: int | None) -> int:
    if block_v is None:
        return min(DEFAULT_BLOCK_V, triton.next_power_of_2(vocab))
    if block_v < 16 or block_v & (block_v - 1):
        raise KernelInputError(
            problem(
                "SR904",
                f"block_v={block_v} is not a power of two >= 16",
                accepted="a power of two >= 16, or None",
                fix="pass block_v=None",
                field="block_v",
            )
        )
    return block_v


def verify_chain_greedy_triton(
    candidates: torch.Tensor,
    target_logits: torch.Tensor,
    *,
    verify_lens: torch.Tensor | None,
    block_v: int | None = None,
) -> ChainVerifyResult:
    b, n, vocab = target_logits.shape
    accept, bonus, out = _outputs(b, n, candidates.device)
    if b == 0:
        return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out)
    _chain_greedy_kernel[(b,)](
        candidates, candidates.stride(0), candidates.stride(1),
        target_logits, *target_logits.stride(),
        verify_lens if verify_lens is not None else candidates,
        accept, bonus, out,
        n, vocab,
        HAS_VLENS=verify_lens is not None,
        BLOCK_V=_block_v(vocab, block_v),
        BLOCK_N=triton.next_power_of_2(n),
        num_warps=8,
    )
    return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out)


def verify_chain_sampling_triton(
    candidates: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    coins: torch.Tensor,
    final_coins: torch.Tensor,
    *,
    verify_lens: torch.Tensor | None,
    block_v: int | None = None,
) -> ChainVerifyResult:
    """Same contract as `verify_chain_sampling_torch` (None draft_probs: target-only rule)."""
    b, n, vocab = target_probs.shape
    accept, bonus, out = _outputs(b, n, candidates.device)
    if b == 0:
        return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out)
    q = draft_probs if draft_probs is not None else target_probs
    q_strides = draft_probs.stride() if draft_probs is not None else (0, 0, 0)
    if coins.shape[1] == 0:
        coins = final_coins[:, None]  # never read (no drafts); keeps the pointer valid
    _chain_sampling_kernel[(b,)](
        candidates, candidates.stride(0), candidates.stride(1),
        target_probs, *target_probs.stride(),
        q, *q_strides,
        coins, coins.stride(0), coins.stride(1),
        final_coins, final_coins.stride(0),
        verify_lens if verify_lens is not None else candidates,
        accept, bonus, out,
        n, vocab,
        HAS_Q=draft_probs is not None,
        HAS_VLENS=verify_lens is not None,
        BLOCK_V=_block_v(vocab, block_v),
        BLOCK_N=triton.next_power_of_2(n),
        num_warps=4,
    )
    return ChainVerifyResult(accept_len=accept, bonus=bonus, output_tokens=out)


# --------------------------------------------------------------------------------------------
# Public wrappers


def verify_chain_greedy(
    candidates: torch.Tensor,
    target_logits: torch.Tensor,
    *,
    verify_lens: torch.Tensor | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
) -> ChainVerifyResult:
    """Greedy leading-match verification of `candidates` [b, n] against `target_logits` [b, n, V].

    `target_logits` may be bf16, fp16, fp32 or fp64 (probabilities work too: argmax is the same).
    `verify_lens` [b] (values 1..n) caps request r at its first verify_lens[r] positions.
    `check_values` (default: on for CPU, off for GPU) validates token ids and NaN (synchronises).
    `backend`: None picks by device (`SPECREG_KERNEL_BACKEND`), or force 'torch' / 'triton'.
    """
    _check_chain(
        candidates, target_logits, "target_logits",
        verify_lens=verify_lens, probabilities=False, check_values=check_values,
    )
    if _choose_backend(backend, candidates) == "triton":
        return verify_chain_greedy_triton(
            candidates, target_logits, verify_lens=verify_lens, block_v=block_v
        )
    return verify_chain_greedy_torch(candidates, target_logits, verify_lens=verify_lens)


def verify_chain_greedy_from_predict(
    candidates: torch.Tensor,
    target_predict: torch.Tensor,
    *,
    verify_lens: torch.Tensor | None = None,
    vocab_size: int | None = None,
    check_values: bool | None = None,
) -> ChainVerifyResult:
    """Greedy verification from the target's argmax already computed (`target_predict` [b, n]).

    Runs as torch ops on any device (small: [b, n]) without host synchronisation. With
    `vocab_size` and value checks on, token ids in both inputs must lie in [0, vocab_size).
    """
    check_shape("candidates", candidates, (None, None))
    check_dtype("candidates", candidates, INDEX_DTYPES)
    b, n = candidates.shape
    if n < 1:
        raise _bad_shape("candidates", "has no anchor column (n = 0)", "shape [b, n] with n >= 1")
    check_shape("target_predict", target_predict, (b, n))
    check_dtype("target_predict", target_predict, INDEX_DTYPES)
    if verify_lens is not None:
        check_shape("verify_lens", verify_lens, (b,))
        check_dtype("verify_lens", verify_lens, INDEX_DTYPES)
    device = check_same_device(
        candidates=candidates, target_predict=target_predict, verify_lens=verify_lens
    )
    if should_check_values(device, check_values):
        if verify_lens is not None:
            check_index_range("verify_lens", verify_lens, 1, n + 1)
        if vocab_size is not None:  # positions past a request's verify_lens may hold -1
            verified = _verified_positions(verify_lens, b, n, device)
            check_index_range("candidates", candidates[verified], 0, vocab_size)
            check_index_range("target_predict", target_predict[verified], 0, vocab_size)
    return verify_chain_greedy_from_predict_torch(
        candidates, target_predict, verify_lens=verify_lens
    )


def _fill_coins(
    b: int,
    n: int,
    device: torch.device,
    coins: torch.Tensor | None,
    final_coins: torch.Tensor | None,
    *,
    seed: int | None,
    offsets: torch.Tensor | None,
    generator: torch.Generator | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Missing coins: columns 0..n-2 of `uniform_coins((b, n))` for the steps, column n-1 final."""
    if coins is not None and final_coins is not None:
        return coins, final_coins
    drawn = uniform_coins((b, n), device=device, seed=seed, offsets=offsets, generator=generator)
    return (
        coins if coins is not None else drawn[:, : n - 1],
        final_coins if final_coins is not None else drawn[:, n - 1],
    )


def verify_chain_sampling(
    candidates: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    *,
    coins: torch.Tensor | None = None,
    final_coins: torch.Tensor | None = None,
    verify_lens: torch.Tensor | None = None,
    seed: int | None = None,
    offsets: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
) -> ChainVerifyResult:
    """Lossless chain rejection sampling (see the module docstring for the rule).

    `target_probs` [b, n, V] and `draft_probs` [b, n-1, V] are probabilities (any float dtype,
    compared in float32); `draft_probs=None` selects the target-only rule. `coins` [b, >= n-1]
    (one per draft) and `final_coins` [b] (the correction / bonus draw) are uniforms in [0, 1);
    missing ones come from `uniform_coins` (seeded by `seed` and per-request `offsets`, else
    from `torch.rand` with `generator`). `verify_lens` [b] caps the verified positions.
    """
    _check_chain(
        candidates, target_probs, "target_probs",
        verify_lens=verify_lens, draft_probs=draft_probs, coins=coins, final_coins=final_coins,
        offsets=offsets, probabilities=True, check_values=check_values,
    )
    b, n, _ = target_probs.shape
    coins, final_coins = _fill_coins(
        b, n, candidates.device, coins, final_coins,
        seed=seed, offsets=offsets, generator=generator,
    )
    if _choose_backend(backend, candidates) == "triton":
        return verify_chain_sampling_triton(
            candidates, target_probs, draft_probs, coins, final_coins,
            verify_lens=verify_lens, block_v=block_v,
        )
    return verify_chain_sampling_torch(
        candidates, target_probs, draft_probs, coins, final_coins, verify_lens=verify_lens
    )


def verify_chain_target_only(
    candidates: torch.Tensor,
    target_probs: torch.Tensor,
    *,
    coins: torch.Tensor | None = None,
    final_coins: torch.Tensor | None = None,
    verify_lens: torch.Tensor | None = None,
    seed: int | None = None,
    offsets: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    backend: BackendChoice = None,
    block_v: int | None = None,
) -> ChainVerifyResult:
    """Lossless chain sampling for drafters without a q: accept x with probability p(x), on
    rejection draw from p with x removed. Same arguments as `verify_chain_sampling`."""
    return verify_chain_sampling(
        candidates, target_probs, None,
        coins=coins, final_coins=final_coins, verify_lens=verify_lens, seed=seed,
        offsets=offsets, generator=generator, check_values=check_values, backend=backend,
        block_v=block_v,
    )


class ChainVerifier:
    """The verifier specreg hands to chain and block drafters (`specreg_make_verifier`).

    It accepts a chain of any width in `widths` (the main config's and every adaptive
    candidate's; by default only `num_draft_tokens`) and returns `specreg.protocols.VerifyResult`.
    """

    rules = ("greedy", "chain_sampling")

    def __init__(
        self,
        num_draft_tokens: int,
        *,
        widths: Sequence[int] | None = None,
        backend: BackendChoice = None,
        check_values: bool | None = None,
    ) -> None:
        accepted = tuple(sorted({*(widths or ()), num_draft_tokens}))
        bad = [w for w in accepted if isinstance(w, bool) or not isinstance(w, int) or w < 1]
        if bad or max(accepted) != num_draft_tokens:
            raise KernelInputError(
                problem(
                    "SR904",
                    f"num_draft_tokens={num_draft_tokens!r} with widths={list(accepted)!r} is not "
                    "a positive integer that is the largest accepted width",
                    accepted="integers >= 1 (the anchor plus gamma drafts); num_draft_tokens the "
                    "largest",
                    fix="pass the resolved plan's verify widths",
                    field="num_draft_tokens",
                )
            )
        self.num_draft_tokens = num_draft_tokens
        self.widths = accepted
        self.gamma = num_draft_tokens - 1
        self.backend = backend
        self.check_values = check_values

    def _check_width(self, candidates: torch.Tensor) -> None:
        if candidates.dim() == 2 and candidates.shape[1] in self.widths:
            return
        check_shape("candidates", candidates, (None, None))
        raise KernelInputError(
            problem(
                "SR900",
                f"candidates has width {candidates.shape[1]}, not one of the plan's verify "
                f"widths {list(self.widths)}",
                accepted=f"candidates [b, n] with n in {list(self.widths)}",
                fix="draft the gamma of the main config or of one adaptive candidate",
                field="candidates",
            )
        )

    @staticmethod
    def _result(found: ChainVerifyResult, width: int) -> VerifyResult:
        return VerifyResult(
            num_accepted=found.accept_len, output_tokens=found.output_tokens, bonus=found.bonus,
            width=width, param_error=found.param_error,
        )

    def verify_greedy(
        self,
        candidates: torch.Tensor,
        target_logits: torch.Tensor,
        *,
        verify_lens: torch.Tensor | None = None,
    ) -> VerifyResult:
        self._check_width(candidates)
        return self._result(
            verify_chain_greedy(
                candidates, target_logits, verify_lens=verify_lens,
                check_values=self.check_values, backend=self.backend,
            ),
            candidates.shape[1],
        )

    def verify_greedy_from_predict(
        self,
        candidates: torch.Tensor,
        target_predict: torch.Tensor,
        *,
        verify_lens: torch.Tensor | None = None,
    ) -> VerifyResult:
        self._check_width(candidates)
        return self._result(
            verify_chain_greedy_from_predict(
                candidates, target_predict, verify_lens=verify_lens,
                check_values=self.check_values,
            ),
            candidates.shape[1],
        )

    def verify_sampling(
        self,
        candidates: torch.Tensor,
        target_probs: torch.Tensor,
        draft_probs: torch.Tensor | None,
        *,
        coins: torch.Tensor | None = None,
        final_coins: torch.Tensor | None = None,
        verify_lens: torch.Tensor | None = None,
        seed: int | None = None,
        offsets: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        params: SamplingParams | None = None,
    ) -> VerifyResult:
        """Classic chain rejection sampling; `draft_probs=None` uses the target-only rule.
        With `params` (per-request temperature, top-k, top-p, min-p, seeds) the probabilities
        are filtered per request first (`verify_chain_with_params`, probabilities=True)."""
        self._check_width(candidates)
        if params is not None:
            return self._with_params(
                candidates, target_probs, draft_probs, params, probabilities=True, coins=coins,
                final_coins=final_coins, verify_lens=verify_lens, seed=seed, offsets=offsets,
                generator=generator,
            )
        return self._result(
            verify_chain_sampling(
                candidates, target_probs, draft_probs,
                coins=coins, final_coins=final_coins, verify_lens=verify_lens, seed=seed,
                offsets=offsets, generator=generator, check_values=self.check_values,
                backend=self.backend,
            ),
            candidates.shape[1],
        )

    def verify_target_only(
        self,
        candidates: torch.Tensor,
        target_probs: torch.Tensor,
        *,
        coins: torch.Tensor | None = None,
        final_coins: torch.Tensor | None = None,
        verify_lens: torch.Tensor | None = None,
        seed: int | None = None,
        offsets: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        params: SamplingParams | None = None,
    ) -> VerifyResult:
        return self.verify_sampling(
            candidates, target_probs, None,
            coins=coins, final_coins=final_coins, verify_lens=verify_lens, seed=seed,
            offsets=offsets, generator=generator, params=params,
        )

    def verify_from_logits(
        self,
        candidates: torch.Tensor,
        target_logits: torch.Tensor,
        draft_logits: torch.Tensor | None = None,
        *,
        params: SamplingParams,
        verify_lens: torch.Tensor | None = None,
        offsets: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> VerifyResult:
        """A batch mixing greedy and sampled requests, from raw logits: temperature-0 requests
        verify greedily, the others by chain sampling on the filtered p and q (target-only
        without `draft_logits`). See `specreg.kernels.chain_params`."""
        self._check_width(candidates)
        return self._with_params(
            candidates, target_logits, draft_logits, params, probabilities=False,
            verify_lens=verify_lens, offsets=offsets, generator=generator,
        )

    def _with_params(
        self, candidates, target, draft, params, *, probabilities, seed=None, **kwargs
    ) -> VerifyResult:
        from specreg.kernels.chain_params import verify_chain_with_params

        if seed is not None:
            raise KernelInputError(
                problem(
                    "SR910",
                    "seed= and params= were both given; with params the seeds are per request",
                    accepted="params.seed (one per request, -1 = unseeded)",
                    fix="drop seed= and put the seed in SamplingParams.of(..., seed=...)",
                    field="seed",
                )
            )
        return self._result(
            verify_chain_with_params(
                candidates, target, draft, params=params, probabilities=probabilities,
                check_values=self.check_values, backend=self.backend, **kwargs,
            ),
            candidates.shape[1],
        )

    def memory(self) -> list[Buffer]:
        """Per request at the widest width: the candidates it verifies and its `VerifyResult`."""
        n = self.num_draft_tokens
        return [
            Buffer(name="candidates", device_bytes=n * 8, per=PER_REQUEST),
            *verify_result_buffers(n),
        ]

    def describe(self) -> str:
        backend = self.backend or "auto"
        return (
            f"ChainVerifier(num_draft_tokens={self.num_draft_tokens}, gamma={self.gamma}, "
            f"widths={list(self.widths)}, "
            f"rules={', '.join(self.rules)}, target-only rule when draft_probs is None, "
            f"backend={backend})"
        )

    def __repr__(self) -> str:
        return self.describe()
