"""`verify_tree_with_params`: tree verification of a batch whose requests carry their own
sampling parameters.

Layout as in `specreg.kernels.tree_verify_sampling` (b requests, N tree nodes, V vocab; the
first-child / next-sibling links). Temperature-0 requests walk the greedy rule
(`specreg.kernels.tree_verify_greedy`) on the raw target; the others walk the sampling rules
(`specreg.kernels.tree_verify_sampling`) on rows filtered by their own parameters
(`specreg.kernels.filtering`), a chunk of requests at a time, so filtered rows exist for at most
1/16 of the batch (`torch_impl.PARAMS_CHUNK_DIVISOR`). With `invariant=True` sampled requests
walk the drafter-invariant rule (`torch_impl.invariant_walk_torch`). Grammar masks
(`specreg.kernels.token_mask`) and penalties (`specreg.kernels.penalties`) apply to the scores
first. `checks` validates what only this path takes; `reference` is the plain per-request rule
the tests hold it to.
"""

from __future__ import annotations

from typing import Any

import torch

from specreg.backend import select_backend
from specreg.contract.filter_order import (
    DEFAULT_FILTER_ORDER,
    FilterOrder,
    FilterRule,
    filter_rule,
)
from specreg.contract.sampling_params import SamplingParams
from specreg.kernels.chain.checks import check_position_values, check_stream_keys
from specreg.kernels.checks import check_params, check_same_device, should_check_values
from specreg.kernels.filtering import filtered_rows, gathered_row_stats
from specreg.kernels.penalties import Penalties, apply_penalties_, tree_context
from specreg.kernels.sampling import request_keys
from specreg.kernels.token_mask import apply_token_bitmask_
from specreg.kernels.tree_coins import tree_coins
from specreg.kernels.tree_lengths import cut_below
from specreg.kernels.tree_verify_greedy.checks import (
    check_tree_inputs,
    check_tree_rows,
    check_tree_values,
    verify_tile,
)
from specreg.kernels.tree_verify_greedy import verify_tree_greedy_torch
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult
from specreg.kernels.tree_verify_params.checks import check_one_draft, check_score_values
from specreg.kernels.tree_verify_params.torch_impl import (
    PARAMS_CHUNK_DIVISOR,
    chunk_size,
    invariant_walk_torch,
    merge_chunk,
)
from specreg.kernels.tree_verify_sampling import sample_tree
from specreg.kernels.tree_verify_sampling.checks import check_coin_values, check_coins
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs

__all__ = ["PARAMS_CHUNK_DIVISOR", "verify_tree_with_params"]


def verify_tree_with_params(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    target: torch.Tensor,
    *,
    depth: int,
    params: SamplingParams,
    draft: torch.Tensor | None = None,
    draft_q: torch.Tensor | None = None,
    probabilities: bool = False,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    coins: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    check_values: bool | None = None,
    block_v: int | None = None,
    backend: str | None = None,
    filter_order: FilterOrder = DEFAULT_FILTER_ORDER,
    token_bitmask: torch.Tensor | None = None,
    penalties: Penalties | None = None,
    draft_lengths: Any = None,
    invariant: bool = False,
) -> TreeVerifyResult:
    """Tree verification of a batch whose requests carry their own sampling parameters.

    `target` [b, N, V] and `draft` [b, N, V] (or None) are logits, or probabilities with
    `probabilities=True`. Temperature-0 requests get `verify_tree_greedy` on the target; the
    others get `verify_tree_sampling` on p = filter(target / T) and q = filter(draft / T)
    (`specreg.kernels.filtering`; the children must have been drawn from that filtered q).
    `draft_q` [b, N, V] instead of `draft`: each node's q as the drafter drew its children from
    it (already filtered, e.g. `specreg.step.draft_sampling.sample_children`'s q), read as given:
    not filtered, masked or penalised here (the rule is exact for any target row, and the
    children were drawn from q as it was); an all-zero row runs the target-only rule at that
    node (a leaf, or children not drawn from q). Both `draft` and `draft_q` is SR929.
    Filtered rows exist only for a chunk of requests at a time (`PARAMS_CHUNK_DIVISOR`).
    Draws read the random stream keyed by each request's key (`request_keys(params, keys,
    generator=generator)`: `params.seed` for a seeded request, else `keys[r]`, else a fresh key)
    and `positions` [b] (the absolute output position of the depth-1 children; default 0), as
    in `verify_tree_sampling`, so a seeded request's tokens depend on its seed and positions
    alone, not on the rest of the batch. `coins` [b, N] replaces the acceptance uniforms
    (SGLang's layout).
    `retrieve_index[r]` must address request r's own rows (r*N .. r*N + N - 1), as `build_tree`
    makes it. Bad parameters: SR910-SR915 with value checks, else `result.param_error`.
    `backend` as in `verify_tree_sampling`. `filter_order` ('specreg', 'vllm' or 'sglang';
    SR130 otherwise) says how top-k, top-p and min-p combine (`specreg.kernels.filtering`).
    `token_bitmask` int32 [b, N, ceil(V / 32)]: the grammar's allowed tokens after each node's
    path (`specreg.kernels.token_mask`); it masks `target` and `draft` IN PLACE before verifying,
    so greedy and sampled requests alike pick only allowed tokens. `penalties`
    (`specreg.kernels.penalties`) penalise `target` IN PLACE at every node, counting the drafts
    on the node's path as output. `draft_lengths` [b] as in `verify_tree_sampling`.
    `invariant=True`: the drafter-invariant rule for sampled requests: the target's token after
    node i is the SAMPLE-role race of its processed row at (key, positions + depth(i)), the
    walk follows the child equal to it and emits the first one no child matches, so the tokens
    equal plain keyed sampling of the processed rows whatever the tree (`draft` is not read).
    """
    rule = filter_rule(filter_order)
    check_tree_inputs(candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, depth)
    retrieve_next_token = cut_below(
        retrieve_next_token, retrieve_next_sibling, draft_lengths, depth=depth,
        check_values=check_values,
    )
    links = (candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling)
    b, n = check_tree_inputs(*links, depth)
    vocab = check_tree_rows(b, n, target=target, draft=draft)
    check_one_draft(draft, draft_q)
    check_tree_rows(b, n, target=target, draft_q=draft_q)
    check_coins(coins, b, n)
    check_stream_keys(keys, positions, b)
    device = check_same_device(
        candidates=candidates, retrieve_index=retrieve_index,
        retrieve_next_token=retrieve_next_token, retrieve_next_sibling=retrieve_next_sibling,
        target=target, draft=draft, draft_q=draft_q, keys=keys, positions=positions,
        coins=coins,
    )
    values = should_check_values(device, check_values)
    check_params(params, b, vocab, device, values=values)
    if values:
        check_tree_values(*links, vocab)
        check_position_values(positions)
        check_coin_values(coins)
        check_score_values(target, draft, draft_q, probabilities=probabilities)
    if token_bitmask is not None:
        for name, scores in (("target", target), ("draft", draft)):
            if scores is not None:
                apply_token_bitmask_(
                    scores, token_bitmask, probabilities=probabilities,
                    check_values=values and name == "target", backend=backend, block_v=block_v,
                    field=f"token_bitmask ({name})",
                )
    if penalties is not None:
        context = tree_context(candidates, retrieve_next_token, retrieve_next_sibling, depth)
        apply_penalties_(target, penalties, context, check_values=values, backend=backend)
    keys = request_keys(params, keys, generator=generator)
    positions = (torch.zeros(b, dtype=torch.int64, device=device) if positions is None
                 else positions.to(torch.int64))
    if invariant:
        return invariant_walk_torch(links, target, params, keys, positions, depth=depth,
                                    probabilities=probabilities, rule=rule)
    triton_path = select_backend(candidates, requested=backend) == "triton"
    if triton_path:
        from specreg.kernels.argmax import row_argmax_triton
        from specreg.kernels.tree_verify_greedy import verify_tree_greedy_triton

        predict = row_argmax_triton(target, block_v=verify_tile(vocab, block_v))
        greedy = verify_tree_greedy_triton(*links, predict, depth=depth)
    else:
        greedy = verify_tree_greedy_torch(*links, torch.argmax(target, dim=-1), depth=depth)
    invalid = params.invalid_rows(vocab)
    sampled = ~params.greedy & ~invalid
    # On CPU only the sampled requests are filtered; on GPU every request is (no host sync) and
    # the greedy ones are overwritten below.
    requests = sampled.nonzero().flatten() if not triton_path else torch.arange(b, device=device)
    parts = [t.clone() for t in (greedy.predicts, greedy.accept_index, greedy.accept_token_num,
                                 greedy.bonus, greedy.output_tokens)]
    chunk = chunk_size(b)
    for start in range(0, requests.shape[0], chunk):
        chunk_requests = requests[start:start + chunk]
        local = _sampled_chunk(
            links, target, (draft, draft_q), params, (keys, positions, coins), chunk_requests,
            depth=depth,
            probabilities=probabilities, triton_path=triton_path, block_v=block_v,
            thresholds=(threshold_single, threshold_acc), rule=rule,
        )
        merge_chunk(parts, local, retrieve_index, chunk_requests, sampled, n)
    predicts, accept_index, num, bonus, out = parts
    rows_invalid = invalid.repeat_interleave(n)
    predicts = torch.where(rows_invalid, -1, predicts)
    accept_index = torch.where(invalid[:, None], -1, accept_index)
    out = torch.where(invalid[:, None], -1, out)
    return TreeVerifyResult(
        predicts=predicts, accept_index=accept_index,
        accept_token_num=torch.where(invalid, 0, num).to(torch.int32),
        bonus=torch.where(invalid, -1, bonus), output_tokens=out, param_error=invalid,
    )


def _sampled_chunk(
    links: tuple[torch.Tensor, ...],
    target: torch.Tensor,
    drafts: tuple[torch.Tensor | None, torch.Tensor | None],
    params: SamplingParams,
    stream: tuple[torch.Tensor, torch.Tensor, torch.Tensor | None],
    requests: torch.Tensor,
    *,
    depth: int,
    probabilities: bool,
    triton_path: bool,
    block_v: int | None,
    thresholds: tuple[float, float],
    rule: FilterRule,
) -> TreeVerifyResult:
    """Tree sampling of `requests` on their filtered rows (local row numbering); `drafts` the
    batch's (draft scores to filter, or already filtered q: at most one of them); `stream` the
    batch's (keys, positions, caller coins or None)."""
    candidates, _, next_token, next_sibling = links
    count = requests.shape[0]
    n, vocab = target.shape[1], target.shape[2]
    local_index = torch.arange(count * n, device=requests.device).view(count, n)
    chosen = params.select(requests)
    temperature = torch.where(chosen.temperature > 0, chosen.temperature, 1.0)
    row_params = SamplingParams(
        temperature=temperature.repeat_interleave(n), top_k=chosen.top_k.repeat_interleave(n),
        top_p=chosen.top_p.repeat_interleave(n), min_p=chosen.min_p.repeat_interleave(n),
        seed=chosen.seed.repeat_interleave(n),
    )
    rows = (requests[:, None] * n + torch.arange(n, device=requests.device)).flatten()
    draft, draft_q = drafts
    filtered = [
        _filtered_tree_rows(scores, rows, row_params, probabilities, triton_path, block_v, rule)
        .view(count, n, vocab) if scores is not None else None
        for scores in (target, draft)
    ]
    if draft_q is not None:
        filtered[1] = draft_q.index_select(0, requests).to(torch.float32)
    keys, positions, coins = (None if t is None else t[requests] for t in stream)
    cand, nt, ns = candidates[requests], next_token[requests], next_sibling[requests]
    parent_coins, child_coins = tree_coins(cand, nt, ns, keys, positions, coins)
    inputs = TreeSamplingInputs(
        cand, local_index, nt, ns, filtered[0], filtered[1], parent_coins, child_coins, keys,
        positions, depth=depth, threshold_single=thresholds[0], threshold_acc=thresholds[1],
    )
    return sample_tree(inputs, triton_path, block_v)


def _filtered_tree_rows(
    scores: torch.Tensor,
    rows: torch.Tensor,
    row_params: SamplingParams,
    probabilities: bool,
    triton_path: bool,
    block_v: int | None,
    rule: FilterRule,
) -> torch.Tensor:
    """Filtered float32 rows `scores.view(-1, V)[rows]` under per-row parameters."""
    flat = scores.reshape(-1, scores.shape[-1])
    p = row_params
    if triton_path:  # the Triton path's own numbers (`filtered_tile`)
        from specreg.kernels.filtering import filtered_rows_triton, row_stats_triton

        tile = verify_tile(flat.shape[-1], block_v)
        stats = row_stats_triton(flat, rows, p.temperature, p.top_k, p.top_p, p.min_p,
                                 probabilities=probabilities, block_v=tile, rule=rule)
        return filtered_rows_triton(flat, rows, p.temperature, stats, p.min_p,
                                    probabilities=probabilities, block_v=tile)
    stats = gathered_row_stats(flat, rows, p.temperature, p.top_k, p.top_p, p.min_p,
                               probabilities=probabilities, rule=rule)
    return filtered_rows(flat.index_select(0, rows), p.temperature, stats, p.min_p,
                         probabilities=probabilities)
