"""The plain per-request rule of tree verification under per-request sampling parameters
(test oracle): greedy requests walk on the raw argmax, the others on filtered rows.

Per request: invalid parameters emit -1; temperature 0 walks the greedy rule
(`specreg.kernels.tree_verify_greedy.reference.greedy_walk`) on the argmax of the raw target
rows; any other request walks the sampling rule (`specreg.kernels.tree_verify_sampling.
reference.sampling_walk`) on the rows `specreg.kernels.filtering.reference` filters by its own
parameters, with the stream coins of its key (`specreg.kernels.tree_coins.reference`).
"""

from __future__ import annotations

import torch

from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, FilterOrder
from specreg.contract.sampling_params import SamplingParams
from specreg.kernels.argmax.reference import row_argmax_reference
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.tree_coins.reference import stream_coins_reference
from specreg.kernels.tree_verify_greedy.reference import greedy_walk, path_result
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult
from specreg.kernels.tree_verify_sampling.reference import sampling_walk


def verify_tree_with_params_reference(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    target: torch.Tensor,
    *,
    depth: int,
    params: SamplingParams,
    keys: torch.Tensor,
    positions: torch.Tensor,
    draft: torch.Tensor | None = None,
    probabilities: bool = False,
    thresholds: tuple[float, float] = (1.0, 1.0),
    filter_order: FilterOrder = DEFAULT_FILTER_ORDER,
) -> TreeVerifyResult:
    """`verify_tree_with_params` given each request's key [b] (`request_keys`: its seed when it
    has one) and positions [b]: the stream coins of `stream_coins_reference`. Requests with
    invalid parameters emit -1."""
    b, n, vocab = target.shape
    invalid = params.invalid_rows(vocab).tolist()
    walks: list[tuple[list[int], int] | None] = []
    for r in range(b):
        links = (candidates[r].tolist(), next_token[r].tolist(), next_sibling[r].tolist())
        temperature = float(params.temperature[r])
        if invalid[r]:
            walks.append(None)
            continue
        if temperature == 0:
            predict = row_argmax_reference(target[r]).tolist()
            walks.append(greedy_walk(*links, predict, depth))
            continue
        rule = dict(temperature=temperature, top_k=int(params.top_k[r]),
                    top_p=float(params.top_p[r]), min_p=float(params.min_p[r]),
                    probabilities=probabilities, order=filter_order)
        p_rows = [filtered_distribution(target[r, i], **rule).tolist() for i in range(n)]
        q_rows = None if draft is None else [
            filtered_distribution(draft[r, i], **rule).tolist() for i in range(n)
        ]
        key, position = int(keys[r]), int(positions[r])
        coins, child_coins = stream_coins_reference(*links, key, position)
        walks.append(sampling_walk(*links, p_rows, q_rows, coins, child_coins, key, position,
                                   depth=depth, thresholds=thresholds))
    result = path_result(candidates, retrieve_index, walks, depth)
    return TreeVerifyResult(
        predicts=result.predicts, accept_index=result.accept_index,
        accept_token_num=result.accept_token_num, bonus=result.bonus,
        output_tokens=result.output_tokens, param_error=torch.tensor(invalid, dtype=torch.bool),
    )
