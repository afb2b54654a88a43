"""The torch implementation of relaxed, typical and synthetic chain acceptance, vectorised over the batch (the CPU path).

The acceptance test is one batched comparison over [b, gamma]; the token after the accepted run
reuses the chain family's emission (`emit_tokens`, from `specreg.kernels.chain`): the residual
draw for relaxed thresholds, a draw from p (synthetic, typical with every draft accepted) or the
row's argmax (typical after a rejection). Typical acceptance reads each verified row once more for its
entropy, in row chunks. No host synchronisation on accelerators.
"""

from __future__ import annotations

import torch

from specreg.kernels.argmax import row_argmax
from specreg.kernels.chain import accept_limits, assemble, emit_tokens, leading_run
from specreg.kernels.chain.types import ChainSamplingInputs, ChainVerifyResult
from specreg.kernels.relaxed.types import SYNTHETIC, THRESHOLDS, RuleParams
from specreg.kernels.row_chunks import cpu_row_chunks


def first_coins(coins: torch.Tensor) -> torch.Tensor:
    """float32 [b]: each request's synthetic coin, the acceptance uniform of its first draft;
    1.0 (no draft accepted) for a chain without drafts."""
    if coins.shape[1] == 0:
        return torch.ones(coins.shape[0], dtype=torch.float32, device=coins.device)
    return coins[:, 0].to(torch.float32)


def synthetic_counts(
    first_coins: torch.Tensor, params: RuleParams, limit: torch.Tensor
) -> torch.Tensor:
    """int64 [b]: the leading positions i < limit with coin < rates[i] (rates past the end: 0)."""
    rates = params.rates_tensor(first_coins.device)
    if not params.rates:
        return torch.zeros_like(limit)
    under = first_coins.to(torch.float32)[:, None] < rates[None, :]
    count = leading_run(under)
    return torch.minimum(count, limit)


def row_entropy(rows: torch.Tensor) -> torch.Tensor:
    """float32 [...]: -sum p log p over the last dimension (0 log 0 = 0), in row chunks."""
    flat = rows.reshape(-1, rows.shape[-1])
    out = torch.empty(flat.shape[0], dtype=torch.float32, device=rows.device)
    for start, stop in cpu_row_chunks(flat.shape[0], flat.shape[1]):
        out[start:stop] = torch.special.entr(flat[start:stop].to(torch.float32)).sum(-1)
    return out.reshape(rows.shape[:-1])


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


def _scalar(value: float, device: torch.device) -> torch.Tensor:
    return torch.tensor(value, dtype=torch.float32, device=device)


def verify_chain_relaxed_torch(inputs: ChainSamplingInputs, params: RuleParams) -> ChainVerifyResult:
    """The rule of `params` (`specreg.kernels.relaxed`) on validated inputs."""
    candidates, target, draft = inputs.candidates, inputs.target_probs, inputs.draft_probs
    b, n, vocab = target.shape
    gamma = n - 1
    device = candidates.device
    limit = accept_limits(inputs.verify_lens, b, n, device)
    drafts = candidates[:, 1:].to(torch.int64)
    valid = (drafts >= 0) & (drafts < vocab)
    emit = emit_tokens
    stream = (inputs.keys, inputs.positions)
    if params.mode == SYNTHETIC:
        accept_len = synthetic_counts(first_coins(inputs.coins), params, limit)
        bonus = emit(target, None, drafts, valid, accept_len, accept_len, *stream)
        return assemble(candidates, accept_len, bonus)
    safe = drafts.clamp(0, vocab - 1).unsqueeze(-1)
    p_x = target[:, :gamma].gather(-1, safe).squeeze(-1).to(torch.float32)
    if params.mode == THRESHOLDS:
        q_x = torch.ones_like(p_x) if draft is None else (
            draft.gather(-1, safe).squeeze(-1).to(torch.float32))
        scaled = inputs.coins[:, :gamma].to(torch.float32) * q_x
        accepted = (scaled * _scalar(params.threshold_acc, device) < p_x) | (
            p_x >= _scalar(params.threshold_single, device))
    else:
        decay = _scalar(params.posterior_alpha, device) * torch.exp(-row_entropy(target[:, :gamma]))
        accepted = p_x > torch.minimum(_scalar(params.posterior_threshold, device), decay)
    accepted &= valid & (torch.arange(gamma, device=device)[None, :] < limit[:, None])
    accept_len = leading_run(accepted)
    if params.mode == THRESHOLDS:
        bonus = emit(target, draft, drafts, valid, limit, accept_len, *stream)
        return assemble(candidates, accept_len, bonus)
    drawn = emit(target, None, drafts, valid, accept_len, accept_len, *stream)
    argmax = row_argmax(_take_rows(target, accept_len))
    return assemble(candidates, accept_len, torch.where(accept_len < limit, argmax, drawn))


def verify_chain_synthetic_greedy_torch(
    candidates: torch.Tensor, target_logits: torch.Tensor, coins: torch.Tensor,
    params: RuleParams, verify_lens: torch.Tensor | None,
) -> ChainVerifyResult:
    """Synthetic count, then the argmax of each request's row after its accepted drafts (one
    [b, V] row read per request)."""
    b, n, _ = target_logits.shape
    limit = accept_limits(verify_lens, b, n, candidates.device)
    accept_len = synthetic_counts(coins, params, limit)
    bonus = row_argmax(_take_rows(target_logits, accept_len))
    return assemble(candidates, accept_len, bonus)
