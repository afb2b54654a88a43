"""The plain per-request rule of chain verification under sampling parameters (the test oracle).

Per request, one position at a time, in plain Python: an invalid request accepts nothing and
emits -1 (`param_error`); a temperature-0 request follows the greedy rule on the target scores;
a sampled request follows the chain rule (classic with a draft, target-only without) on the
filtered distributions of `specreg.kernels.filtering.reference.filtered_distribution`, with the
same coins as the kernels and the same draw (the exponential race on the request's stream at
its stopping position, `block_race_reference`). The filtered values are computed in float64 by a full sort, so a
coin within rounding distance of a boundary could in principle decide differently; with
random coins that does not happen in practice, and the kept token sets are exactly the rule's.
"""

from __future__ import annotations

import torch

from specreg.kernels.argmax.reference import row_argmax_reference
from specreg.kernels.chain.reference import limit_of, result_of
from specreg.kernels.chain.types import ChainVerifyResult
from specreg.kernels.chain_params.types import ChainParamsInputs
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.random_stream.reference import draw_lanes
from specreg.kernels.random_stream.types import RESIDUAL_ROLE, SAMPLE_ROLE
from specreg.kernels.sampling.reference import block_race_reference, residual_reference


def verify_chain_with_params_reference(inputs: ChainParamsInputs) -> ChainVerifyResult:
    """`verify_chain_with_params`'s rule, request by request (see the module docstring)."""
    candidates, target, draft, params = (
        inputs.candidates, inputs.target, inputs.draft, inputs.params
    )
    b, n, vocab = target.shape
    lens = None if inputs.verify_lens is None else inputs.verify_lens.tolist()
    invalid = params.invalid_rows(vocab).tolist()
    rows = []
    for r in range(b):
        drafts = [int(t) for t in candidates[r, 1:].tolist()]
        if invalid[r]:
            rows.append((drafts, 0, -1))
            continue
        limit = limit_of(lens, r, n)
        temperature = float(params.temperature[r])
        if temperature == 0:
            predict = row_argmax_reference(target[r]).tolist()
            accept = 0
            while accept < limit and drafts[accept] == predict[accept]:
                accept += 1
            rows.append((drafts, accept, predict[accept]))
            continue
        rule = dict(
            temperature=temperature, top_k=int(params.top_k[r]), top_p=float(params.top_p[r]),
            min_p=float(params.min_p[r]), probabilities=inputs.probabilities,
            order=inputs.filter_order,
        )

        def p_at(i: int, r: int = r, rule: dict = rule) -> list[float]:
            return filtered_distribution(target[r, i], **rule).tolist()

        def q_at(i: int, r: int = r, rule: dict = rule) -> list[float] | None:
            return None if draft is None else filtered_distribution(draft[r, i], **rule).tolist()

        key, position = int(inputs.keys[r]), int(inputs.positions[r])
        if inputs.invariant:  # the target's own race draw at each position
            accept = 0
            while True:
                lanes = draw_lanes(key, SAMPLE_ROLE, position + accept)
                token = block_race_reference(p_at(accept), lanes)
                if accept < limit and drafts[accept] == token:
                    accept += 1
                    continue
                break
            rows.append((drafts, accept, token))
            continue
        coins = inputs.coins[r].to(torch.float32).tolist()
        accept = 0
        while accept < limit:
            x = drafts[accept]
            if not 0 <= x < vocab:
                break
            q = q_at(accept)
            q_x = 1.0 if q is None else q[x]
            if not coins[accept] * q_x < p_at(accept)[x]:
                break
            accept += 1
        rejected = accept < limit
        weights = p_at(accept)
        if rejected:
            excluded = drafts[accept]
            weights = residual_reference(weights, q_at(accept), excluded)
        role = RESIDUAL_ROLE if rejected else SAMPLE_ROLE
        lanes = draw_lanes(key, role, position + accept)
        rows.append((drafts, accept, block_race_reference(weights, lanes)))
    result = result_of(rows, n)
    return ChainVerifyResult(
        accept_len=result.accept_len, bonus=result.bonus, output_tokens=result.output_tokens,
        param_error=torch.tensor(invalid, dtype=torch.bool),
    )
