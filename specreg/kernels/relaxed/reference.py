"""The plain per-request rules of relaxed, typical and synthetic chain acceptance, as loops (the test oracle).

Same coins as the kernels (`ChainSamplingInputs`); float32 rounding is reproduced with `f32` so
the tokens compare exactly. The entropy of typical acceptance is summed in double and rounded
once (the kernels sum float32 in other orders: a draft whose p(x) lies within rounding of the
cutoff may differ, a measure-zero event in the tests).
"""

from __future__ import annotations

import math

import torch

from specreg.kernels.argmax.reference import row_argmax_reference
from specreg.kernels.chain.reference import emit_reference, limit_of, result_of
from specreg.kernels.chain.types import ChainSamplingInputs, ChainVerifyResult
from specreg.kernels.chain_params.types import ChainParamsInputs
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.relaxed.types import SYNTHETIC, THRESHOLDS, RuleParams
from specreg.kernels.sampling.reference import f32


def synthetic_count(coin: float, rates: tuple[float, ...], limit: int) -> int:
    """Drafts accepted: the leading positions i < limit with coin < rates[i]."""
    accept = 0
    while accept < limit and accept < len(rates) and coin < f32(rates[accept]):
        accept += 1
    return accept


def typical_cutoff(p_row: list[float], params: RuleParams) -> float:
    """min(posterior_threshold, posterior_alpha * exp(-H(p))), H in nats."""
    entropy = -sum(v * math.log(v) for v in p_row if v > 0)
    return min(f32(params.posterior_threshold),
               f32(f32(params.posterior_alpha) * math.exp(-f32(entropy))))


def _accepts(params: RuleParams, p_row: list[float], p_x: float, q_x: float, coin: float) -> bool:
    if params.mode == THRESHOLDS:
        scaled = f32(f32(coin * q_x) * f32(params.threshold_acc))
        return scaled < p_x or p_x >= f32(params.threshold_single)
    return p_x > typical_cutoff(p_row, params)


def verify_chain_relaxed_reference(
    inputs: ChainSamplingInputs, params: RuleParams
) -> ChainVerifyResult:
    """Per request: walk the chain under the rule's acceptance test, stop at the first
    rejection or the verify limit, then emit (thresholds: as the lossless rule; typical: argmax
    after a rejection, a draw from p otherwise; synthetic: a draw from p)."""
    candidates, target, draft = inputs.candidates, inputs.target_probs, inputs.draft_probs
    b, n, vocab = target.shape
    lens = None if inputs.verify_lens is None else [int(v) for v in inputs.verify_lens.tolist()]
    rows = []
    for r in range(b):
        drafts = [int(t) for t in candidates[r, 1:].tolist()]
        p = target[r].to(torch.float32).tolist()
        q = None if draft is None else draft[r].to(torch.float32).tolist()
        coins = inputs.coins[r].to(torch.float32).tolist()
        key, position = int(inputs.keys[r]), int(inputs.positions[r])
        limit = limit_of(lens, r, n)
        if params.mode == SYNTHETIC:
            accept = synthetic_count(coins[0] if coins else 1.0, params.rates, limit)
            token = emit_reference(p[accept], None, -1, False, key, position + accept)
            rows.append((drafts, accept, token))
            continue
        accept = 0
        while accept < limit:
            x = drafts[accept]
            if not 0 <= x < vocab:
                break
            q_x = 1.0 if q is None or params.mode != THRESHOLDS else q[accept][x]
            if not _accepts(params, p[accept], p[accept][x], q_x, coins[accept]):
                break
            accept += 1
        rejected = accept < limit
        if params.mode == THRESHOLDS:
            excluded = drafts[accept] if rejected else -1
            q_row = None if q is None or not rejected else q[accept]
            token = emit_reference(p[accept], q_row, excluded, rejected, key, position + accept)
        elif rejected:
            token = int(row_argmax_reference(target[r, accept][None])[0])
        else:
            token = emit_reference(p[accept], None, -1, False, key, position + accept)
        rows.append((drafts, accept, token))
    return result_of(rows, n)


def verify_chain_synthetic_greedy_reference(
    candidates: torch.Tensor, target_logits: torch.Tensor, coins: torch.Tensor,
    params: RuleParams, verify_lens: torch.Tensor | None,
) -> ChainVerifyResult:
    """Synthetic acceptance with greedy verification: the synthetic count, then the argmax of
    the row after the accepted drafts."""
    b, n, _ = target_logits.shape
    lens = None if verify_lens is None else [int(v) for v in verify_lens.tolist()]
    rows = []
    for r in range(b):
        drafts = [int(t) for t in candidates[r, 1:].tolist()]
        accept = synthetic_count(float(coins[r]), params.rates, limit_of(lens, r, n))
        rows.append((drafts, accept, int(row_argmax_reference(target_logits[r, accept][None])[0])))
    return result_of(rows, n)


def verify_chain_relaxed_with_params_reference(
    inputs: ChainParamsInputs, params: RuleParams
) -> ChainVerifyResult:
    """`verify_chain_relaxed_with_params`, request by request: invalid parameters accept
    nothing and emit -1; temperature 0 is plain greedy on the target scores (synthetic: the
    synthetic count from the first coin, then the argmax); a sampled request runs
    `verify_chain_relaxed_reference` on its rows filtered by `filtered_distribution`."""
    candidates, target, draft, sampling = (
        inputs.candidates, inputs.target, inputs.draft, inputs.params
    )
    b, n, vocab = target.shape
    lens = None if inputs.verify_lens is None else [int(v) for v in inputs.verify_lens.tolist()]
    invalid = sampling.invalid_rows(vocab).tolist()
    rows = []
    for r in range(b):
        drafts = [int(t) for t in candidates[r, 1:].tolist()]
        limit = limit_of(lens, r, n)
        temperature = float(sampling.temperature[r])
        if invalid[r]:
            rows.append((drafts, 0, -1))
            continue
        if temperature == 0:
            predict = row_argmax_reference(target[r]).tolist()
            if params.mode == SYNTHETIC:
                coin = float(inputs.coins[r, 0]) if n > 1 else 1.0
                accept = synthetic_count(coin, params.rates, limit)
            else:
                accept = 0
                while accept < limit and drafts[accept] == predict[accept]:
                    accept += 1
            rows.append((drafts, accept, predict[accept]))
            continue
        rule = dict(temperature=temperature, top_k=int(sampling.top_k[r]),
                    top_p=float(sampling.top_p[r]), min_p=float(sampling.min_p[r]),
                    probabilities=inputs.probabilities, order=inputs.filter_order)

        def filtered(scores: torch.Tensor, rule: dict = rule) -> torch.Tensor:
            return torch.stack([filtered_distribution(s, **rule) for s in scores])[None]

        one = ChainSamplingInputs(
            candidates=candidates[r:r + 1], target_probs=filtered(target[r]).to(torch.float32),
            draft_probs=None if draft is None else filtered(draft[r]).to(torch.float32),
            coins=inputs.coins[r:r + 1], keys=inputs.keys[r:r + 1],
            positions=inputs.positions[r:r + 1],
            verify_lens=None if lens is None else inputs.verify_lens[r:r + 1],
        )
        found = verify_chain_relaxed_reference(one, params)
        rows.append((drafts, int(found.accept_len[0]), int(found.bonus[0])))
    result = result_of(rows, n)
    return ChainVerifyResult(
        accept_len=result.accept_len, bonus=result.bonus, output_tokens=result.output_tokens,
        param_error=torch.tensor(invalid, dtype=torch.bool),
    )
