"""`verify_tree_sampling` / `verify_tree_with_params`: lossless tree speculative sampling.

Layout (b requests, N tree nodes, V vocab): `candidates` [b, N] are the node tokens (node 0 =
root = bonus token of the previous step); `retrieve_index` [b, N] maps a node to its flat row
r*N + i; `retrieve_next_token` / `retrieve_next_sibling` [b, N] are the first-child / next-sibling
links (-1 = none), children in ascending local index, parents before children. Row i of
`target_logits` / `target_probs` [b, N, V] is the target's distribution for the token FOLLOWING
node i; row i of `draft_probs` [b, N, V] is q, the distribution node i's children were drawn from.

The wrappers validate, fill in the stream's keys and coins, pick the backend and dispatch to
`torch_impl.verify_tree_sampling_torch` or `triton_impl.verify_tree_sampling_triton` (both take
one `TreeSamplingInputs`); `reference` is the plain per-request walk the tests hold both to.
`verify_tree_with_params` mixes greedy requests (`verify_greedy`) and sampled ones on filtered
rows (`specreg.kernels.filtering`), a chunk of requests at a time.

Randomness: every draw reads the counter-based random stream (`specreg.kernels.random_stream`)
keyed by (request key, role, absolute position). Node c at depth d (the root 0) sits at
absolute position `positions + d - 1` (`positions`: the position of the depth-1 children, the
token the root's row verifies), and its acceptance uniform is the stream's uniform of (key,
ACCEPT role, that position, its token): one independent value per (position, draft token), the
chain family's acceptance coins at tree positions. Under recursive rejection child c is tested
with its own uniform; under the target-only rule the children of P share one coin, the uniform
of P's first child. The walk tries the children of one node per position, so no two decisions
of a walk read the same value, but for a repeated sibling token under recursive rejection,
which is rejected whatever its coin (its residual is 0 once it was rejected). A
caller's `coins` [b, N] (SGLang's uniforms, for parity) replace them in SGLang's layout: P's
target-only coin `coins[:, P]`, child c's coin `coins[:, c - 1]`. The final token is a race in
the RESIDUAL role at the position of the last accepted node's children, whether a child was
tried there or not: a tree drafter draws children from the SAMPLE role at that position, and a
tree pruned by those draws may stop at a leaf because of them, so the final draw never reads
them. Nothing depends on the request's row, the batch, chunking or the backend.

Sampling, per parent node P (reset whenever a child is accepted):
- Target-only (no `draft_probs`, or P's q row is all zero): children c_1 < c_2 < ... are tried
  with P's coin u; accept c_i when `u < (p(c_1) + ... + p(c_i)) / threshold_acc`
  or `p(c_i) >= threshold_single`, counting a token already tried at P as 0. With thresholds 1.0
  a child is accepted with probability exactly p(c_i) and otherwise the residual is p with the
  tried tokens removed: the emitted token is distributed as p for any fixed set of children.
- Recursive rejection sampling (P's q row has mass; thresholds are not used): the children must
  have been drawn from q WITHOUT replacement, in sibling order. With residual target p_i
  (p_1 = p) and q_i = q without the tokens drawn before c_i, renormalised, c_i is accepted when
  `u(c_i) * q_i(c_i) < p_i(c_i)`; on rejection p_{i+1} = norm(max(p_i - q_i, 0)).
  Each step emits exactly p_i, so the node emits exactly p. p_i is never materialised: it equals
  max(p - a_i q, 0) / W_i with a scalar a_i for untried tokens and a frozen coefficient per tried
  token (at most N - 1 per node, kept sparsely), and W_i is one reduction over the row.
- Final token: raced from the residual at the last accepted node (p itself when no child was
  tried); a residual with no mass (rounding) falls back to p. The race is the chain family's
  two-level exponential race (`specreg_eagle.kernels.residual_draw`: the block masses, then one
  block's 128 weights), so both implementations read that row once, and it is exact: no 24-bit
  coin limits the tokens it can reach.

The torch walk decides the target-only rule for every node at once (a parent's decisions depend
only on its children and coin) and follows the accepted children for `depth` levels; with q it
walks N - 1 steps vectorised over requests, computing a residual mass only where a next sibling
will be tested and a node's masses only where the walk goes on below it.

No [b, N, V] temporaries, the caller's tensors are never written, no host synchronisation.
"""

from __future__ import annotations

from typing import Any

import torch

from specreg.backend import select_backend
from specreg.errors import KernelInputError, problem
from specreg.kernels.chain.checks import check_position_values, check_stream_keys
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    check_dtype,
    check_params,
    check_probabilities,
    check_same_device,
    check_shape,
    should_check_values,
)
from specreg.kernels.filtering import filtered_rows, gathered_row_stats
from specreg.contract.filter_order import (
    DEFAULT_FILTER_ORDER,
    FilterOrder,
    FilterRule,
    filter_rule,
)
from specreg.kernels.penalties import Penalties, apply_penalties_, tree_context
from specreg.kernels.random_stream import stream_keys
from specreg.kernels.sampling import request_keys
from specreg.contract.sampling_params import SamplingParams
from specreg_eagle.kernels.tree_lengths import cut_below
from specreg_eagle.kernels.verify_greedy.checks import (
    check_tree_inputs,
    check_tree_rows,
    check_tree_values,
    verify_tile,
)
from specreg_eagle.kernels.verify_greedy import verify_tree_greedy_torch
from specreg_eagle.kernels.verify_greedy.types import TreeVerifyResult
from specreg_eagle.kernels.verify_sampling.torch_impl import (
    caller_tree_coins,
    stream_tree_coins,
    verify_tree_sampling_torch,
)
from specreg_eagle.kernels.verify_sampling.types import TreeSamplingInputs


def verify_tree_sampling(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    target_probs: torch.Tensor,
    *,
    depth: int,
    draft_probs: torch.Tensor | None = None,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    coins: torch.Tensor | None = None,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    block_v: int | None = None,
    backend: str | None = None,
    draft_lengths: Any = None,
) -> TreeVerifyResult:
    """Tree speculative sampling (see the module docstring for both rules).

    `target_probs` [b, N, V] float; `draft_probs` None (target-only) or [b, N, V] (row i = q of
    node i's children; all-zero rows use the target-only rule). Draws are keyed by `keys`
    int64 [b] (each request's key: its seed, or a key drawn once for the request; missing ones
    are fresh keys from `generator`) and `positions` int64 [b] (the absolute output position of
    the depth-1 children, the token the root's row verifies; default 0): see the module
    docstring. `coins` [b, N] float in [0, 1) replaces the acceptance uniforms with a caller's
    (SGLang's layout: `coins[:, P]` parent P's target-only coin, `coins[:, c - 1]` child c's).
    Thresholds in (0, 1] apply to the target-only rule; 1.0 keeps it lossless. `backend`:
    'auto' | 'torch' | 'triton' | None (None reads SPECREG_KERNEL_BACKEND).
    `draft_lengths` [b] (0..depth; `specreg.step.draft_lengths`): request r verifies only the nodes
    at depth <= draft_lengths[r] (0: the root alone, one plain sample from its row).
    """
    b, n = check_tree_inputs(
        candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, depth
    )
    vocab = check_tree_rows(b, n, target_probs=target_probs, draft_probs=draft_probs)
    retrieve_next_token = cut_below(
        retrieve_next_token, retrieve_next_sibling, draft_lengths, depth=depth,
        check_values=check_values,
    )
    if coins is not None:
        check_shape("coins", coins, (b, n))
        check_dtype("coins", coins, FLOAT_DTYPES)
    check_stream_keys(keys, positions, b)
    for name, value in (("threshold_single", threshold_single), ("threshold_acc", threshold_acc)):
        if not isinstance(value, (int, float)) or not 0.0 < float(value) <= 1.0:
            raise KernelInputError(
                problem("SR904", f"{name}={value!r} is outside (0, 1]", accepted="(0, 1]",
                        fix=f"pass {name}=1.0 for lossless sampling", field=name)
            )
    device = check_same_device(
        candidates=candidates, retrieve_index=retrieve_index,
        retrieve_next_token=retrieve_next_token, retrieve_next_sibling=retrieve_next_sibling,
        target_probs=target_probs, draft_probs=draft_probs, coins=coins, keys=keys,
        positions=positions,
    )
    if should_check_values(device, check_values):
        check_tree_values(
            candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, vocab
        )
        check_probabilities("target_probs", target_probs)
        if draft_probs is not None:
            check_probabilities("draft_probs", draft_probs, allow_zero_rows=True)
        if coins is not None and not bool(((coins >= 0) & (coins < 1)).all()):
            raise KernelInputError(
                problem("SR904", "coins holds values outside [0, 1)", accepted="[0, 1)",
                        fix="leave them out: they come from the random stream keyed by keys= "
                        "and positions=", field="coins")
            )
        check_position_values(positions)
    keys, positions = stream_keys(b, device, keys, positions, generator=generator)
    parent_coins, child_coins = tree_coins(
        candidates, retrieve_next_token, retrieve_next_sibling, keys, positions, coins
    )
    inputs = TreeSamplingInputs(
        candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, target_probs,
        draft_probs, parent_coins, child_coins, keys, positions, depth=depth,
        threshold_single=threshold_single, threshold_acc=threshold_acc,
    )
    return _sample(inputs, select_backend(candidates, requested=backend) == "triton", block_v)


def tree_coins(
    candidates: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    keys: torch.Tensor,
    positions: torch.Tensor,
    coins: torch.Tensor | None,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(coins, child_coins) [b, N] of `TreeSamplingInputs`: a caller's SGLang-layout `coins`
    (`caller_tree_coins`), else the stream's acceptance uniforms (`stream_tree_coins`)."""
    if coins is not None:
        return caller_tree_coins(coins)
    return stream_tree_coins(candidates, next_token, next_sibling, keys, positions)


def _sample(inputs: TreeSamplingInputs, triton_path: bool, block_v: int | None) -> TreeVerifyResult:
    if triton_path:
        from specreg_eagle.kernels.verify_sampling.triton_impl import verify_tree_sampling_triton

        return verify_tree_sampling_triton(inputs, block_v=block_v)
    return verify_tree_sampling_torch(inputs)


# ---------------------------------------------------------------------------------------------
# Per-request sampling parameters
# ---------------------------------------------------------------------------------------------

#: Requests per chunk of filtered rows, as a fraction of the batch (at least one request): the
#: filtered [chunk, N, V] rows the sampling rules read stay under 1/16 of the inputs.
PARAMS_CHUNK_DIVISOR = 16


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
    from specreg.kernels.chain_params.checks import check_scores
    from specreg.kernels.token_mask import apply_token_bitmask_

    rule = filter_rule(filter_order)
    check_tree_inputs(candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, depth)
    retrieve_next_token = cut_below(
        retrieve_next_token, retrieve_next_sibling, draft_lengths, depth=depth,
        check_values=check_values,
    )
    links = (candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling)
    b, n = check_tree_inputs(*links, depth)
    vocab = check_tree_rows(b, n, target=target, draft=draft)
    _check_one_draft(draft, draft_q)
    check_tree_rows(b, n, target=target, draft_q=draft_q)
    if coins is not None:
        check_shape("coins", coins, (b, n))
        check_dtype("coins", coins, FLOAT_DTYPES)
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
        if coins is not None and not bool(((coins >= 0) & (coins < 1)).all()):
            raise KernelInputError(
                problem("SR904", "coins holds values outside [0, 1)", accepted="[0, 1)",
                        fix="leave them out: they come from the random stream keyed by keys= "
                        "and positions=", field="coins")
            )
        for name, scores in (("target", target), ("draft", draft)):
            if scores is None:
                continue
            if probabilities:
                check_probabilities(name, scores, allow_zero_rows=name == "draft")
            else:
                check_scores(name, scores)
        if draft_q is not None:
            check_probabilities("draft_q", draft_q, allow_zero_rows=True)
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
        return _invariant_walk(links, target, params, keys, positions, depth=depth,
                               probabilities=probabilities, rule=rule)
    triton_path = select_backend(candidates, requested=backend) == "triton"
    if triton_path:
        from specreg.kernels.argmax import row_argmax_triton
        from specreg_eagle.kernels.verify_greedy import verify_tree_greedy_triton

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
    chunk = max(1, b // PARAMS_CHUNK_DIVISOR)
    for start in range(0, requests.shape[0], chunk):
        chunk_requests = requests[start:start + chunk]
        local = _sampled_chunk(
            links, target, (draft, draft_q), params, (keys, positions, coins), chunk_requests,
            depth=depth,
            probabilities=probabilities, triton_path=triton_path, block_v=block_v,
            thresholds=(threshold_single, threshold_acc), rule=rule,
        )
        _merge_chunk(parts, local, retrieve_index, chunk_requests, sampled, n)
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


def _check_one_draft(draft: torch.Tensor | None, draft_q: torch.Tensor | None) -> None:
    """SR929 when both the draft scores to filter and the filtered q are given."""
    if draft is not None and draft_q is not None:
        raise KernelInputError(
            problem(
                "SR929",
                "both draft (scores the verifier filters) and draft_q (the q the children were "
                "drawn from, read as given) were passed: they name two q for one node",
                accepted="draft=, or draft_q=, or neither (the target-only rule)",
                fix="pass draft_q= when the drafter returns its filtered q (Medusa's "
                "draft_probs), draft= when it returns logits (EAGLE's draft_logits)",
                field="draft_q",
            )
        )


def _invariant_walk(
    links: tuple[torch.Tensor, ...], target: torch.Tensor, params: SamplingParams,
    keys: torch.Tensor, positions: torch.Tensor, *, depth: int, probabilities: bool,
    rule: Any,
) -> TreeVerifyResult:
    """The drafter-invariant walk: every node's prediction is the target's own token there
    (the argmax for greedy requests, the SAMPLE-role race of the processed row at the position
    of the node's children for sampled ones), then the greedy tree walk on those predictions.
    Rows are processed a chunk of requests at a time."""
    from specreg.kernels.random_stream import draw_lanes_torch
    from specreg.kernels.random_stream.types import SAMPLE_ROLE
    from specreg.kernels.relaxed import filtered_probabilities
    from specreg.kernels.block_race import block_race_torch
    from specreg_eagle.kernels.tree_lengths import node_depths

    b, n, vocab = target.shape
    invalid = params.invalid_rows(vocab)
    predict = torch.argmax(target, dim=-1)
    depths = node_depths(links[2], links[3])
    sampled = (~params.greedy & ~invalid).nonzero().flatten()
    chunk = max(1, b // PARAMS_CHUNK_DIVISOR)
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
    return _sample(inputs, triton_path, block_v)


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


def _merge_chunk(
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
