"""Tree verification under per-request parameters in torch: the drafter-invariant walk, and
the merge of a chunk of sampled requests' results over the greedy ones.

`invariant_walk_torch` races every node's target token on its filtered row (the SAMPLE role of
the stream, a chunk of requests at a time) and walks the greedy rule on those tokens;
`merge_chunk` writes a chunk's results (local rows) into the batch's (global rows).
"""

from __future__ import annotations

from typing import Any

import torch

from specreg.contract.sampling_params import SamplingParams
from specreg.kernels.block_race import block_race_torch
from specreg.kernels.random_stream import draw_lanes_torch
from specreg.kernels.random_stream.types import SAMPLE_ROLE
from specreg.kernels.relaxed import filtered_probabilities
from specreg.kernels.tree_lengths import node_depths
from specreg.kernels.tree_verify_greedy import verify_tree_greedy_torch
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult

#: Requests per chunk of filtered rows, as a fraction of the batch (at least one request): the
#: filtered [chunk, N, V] rows the sampling rules read stay under 1/16 of the inputs.
PARAMS_CHUNK_DIVISOR = 16


def chunk_size(b: int) -> int:
    """Requests per chunk of filtered rows in a batch of `b` (`PARAMS_CHUNK_DIVISOR`)."""
    return max(1, b // PARAMS_CHUNK_DIVISOR)


def invariant_walk_torch(
    links: tuple[torch.Tensor, ...], target: torch.Tensor, params: SamplingParams,
    keys: torch.Tensor, positions: torch.Tensor, *, depth: int, probabilities: bool,
    rule: Any,
) -> TreeVerifyResult:
    """The drafter-invariant walk: every node's prediction is the target's own token there
    (the argmax for greedy requests, the SAMPLE-role race of the processed row at the position
    of the node's children for sampled ones), then the greedy tree walk on those predictions.
    Rows are processed a chunk of requests at a time."""
    b, n, vocab = target.shape
    invalid = params.invalid_rows(vocab)
    predict = torch.argmax(target, dim=-1)
    depths = node_depths(links[2], links[3])
    sampled = (~params.greedy & ~invalid).nonzero().flatten()
    chunk = chunk_size(b)
    for start in range(0, sampled.shape[0], chunk):
        rows = sampled[start:start + chunk]
        p = filtered_probabilities(target[rows], params.select(rows), probabilities=probabilities,
                                   rule=rule)
        lanes = draw_lanes_torch(keys[rows, None], SAMPLE_ROLE, positions[rows, None] + depths[rows])
        predict[rows] = block_race_torch(p.reshape(-1, vocab), lanes.reshape(-1, 2)).view(-1, n)
    found = verify_tree_greedy_torch(*links, predict, depth=depth)
    out = torch.where(invalid[:, None], -1, found.output_tokens)
    return TreeVerifyResult(
        predicts=torch.where(invalid.repeat_interleave(n), -1, found.predicts),
        accept_index=torch.where(invalid[:, None], -1, found.accept_index),
        accept_token_num=torch.where(invalid, 0, found.accept_token_num).to(torch.int32),
        bonus=torch.where(invalid, -1, found.bonus), output_tokens=out, param_error=invalid,
    )


def merge_chunk(
    parts: list[torch.Tensor],
    local: TreeVerifyResult,
    retrieve_index: torch.Tensor,
    requests: torch.Tensor,
    sampled: torch.Tensor,
    n: int,
) -> None:
    """Write a chunk's sampled results over the greedy ones, for its sampled requests."""
    predicts, accept_index, num, bonus, out = parts
    count = requests.shape[0]
    use = sampled[requests]
    owner_rows = retrieve_index[requests].to(torch.int64)  # [count, N] global flat rows
    local_nodes = local.accept_index - (torch.arange(count, device=requests.device) * n)[:, None]
    global_index = torch.where(
        local.accept_index >= 0, owner_rows.gather(1, local_nodes.clamp_min(0)), -1
    )
    accept_index[requests] = torch.where(use[:, None], global_index, accept_index[requests])
    num[requests] = torch.where(use, local.accept_token_num.to(num.dtype), num[requests])
    bonus[requests] = torch.where(use, local.bonus, bonus[requests])
    out[requests] = torch.where(use[:, None], local.output_tokens, out[requests])
    flat_rows = owner_rows.flatten()
    predicts[flat_rows] = torch.where(
        use.repeat_interleave(n), local.predicts.view(-1), predicts[flat_rows]
    )
