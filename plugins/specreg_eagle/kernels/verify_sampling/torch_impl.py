"""Tree sampling in torch: the walk vectorised over requests (the CPU path, and CUDA without
Triton).

Per parent node, the target-only rule or recursive rejection sampling (see the package
docstring). The residual p_i is never materialised: it is max(p - a_i q, 0) / W_i with a scalar
a_i for untried tokens and a frozen coefficient per tried token (at most N - 1 per node, kept
sparsely). No [b, N, V] temporaries; the caller's tensors are never written. On CPU the masses
and the final draw read only the rows the walk needs, in cache-sized chunks
(`_residual_mass_cpu`, `_final_token_cpu`, `_accepted_masses`): the CPU-tuned branches.
`cpu_branches(device)` picks them, so a test can run the accelerators' branches on a CPU.
"""

from __future__ import annotations

import torch

from specreg.kernels.sampling import inverse_cdf_sample
from specreg.kernels.sampling.torch_impl import (
    cpu_row_chunks,
    inverse_cdf_from_cdf,
    take_rows_float32,
)
from specreg_eagle.kernels.verify_greedy.torch_impl import assemble_result
from specreg_eagle.kernels.verify_greedy.types import TreeVerifyResult
from specreg_eagle.kernels.verify_sampling.types import TreeSamplingInputs


def verify_tree_sampling_torch(inputs: TreeSamplingInputs) -> TreeVerifyResult:
    """Tree sampling of `inputs`, vectorised over requests (one loop of N - 1 walk steps); on
    CPU the residual masses and the final draw read only the rows a request needs."""
    candidates, retrieve_index = inputs.candidates, inputs.retrieve_index
    next_token, next_sibling = inputs.next_token, inputs.next_sibling
    target_probs, draft_probs = inputs.target_probs, inputs.draft_probs
    coins, final_coins, depth = inputs.coins, inputs.final_coins, inputs.depth
    threshold_single, threshold_acc = inputs.threshold_single, inputs.threshold_acc
    b, n, vocab = target_probs.shape
    device = candidates.device
    f32 = torch.float32
    rows = torch.arange(b, device=device)
    cand = candidates.to(torch.int64)
    nt, ns = next_token.to(torch.int64), next_sibling.to(torch.int64)
    coins = coins.to(f32)
    cap = max(n - 1, 1)
    slot_ids = torch.arange(cap, device=device).unsqueeze(0)
    has_q = draft_probs is not None
    if draft_probs is not None:
        # Masses only of the nodes the walk looks below (the root here, accepted nodes below):
        # summing every node's rows up front would read all of p and q once more.
        root = torch.zeros_like(rows)
        q_left = _node_mass(draft_probs, rows, root)
        norm = _node_mass(target_probs, rows, root)
        rrs = q_left > 0

    path = torch.full((b, depth + 1), -1, dtype=torch.int64, device=device)
    path[:, 0] = 0
    last = torch.zeros(b, dtype=torch.int64, device=device)
    cur = nt[:, 0].clone()
    count = torch.zeros(b, dtype=torch.int64, device=device)
    # Per-parent state, reset on acceptance.
    prob_acc = torch.zeros(b, dtype=f32, device=device)
    tried_tok = torch.full((b, cap), -1, dtype=torch.int64, device=device)
    tried_val = torch.zeros(b, cap, dtype=f32, device=device)  # removed p (TO) or coefficient (RRS)
    tried_cnt = torch.zeros(b, dtype=torch.int64, device=device)
    coef = torch.zeros(b, dtype=f32, device=device)
    if not has_q:
        rrs = torch.zeros(b, dtype=torch.bool, device=device)

    def row_probs(src: torch.Tensor, node: torch.Tensor) -> torch.Tensor:
        return src[rows, node].to(f32)  # [b, V]

    def residual_mass(p_row, q_row, a, tok, val, cnt):
        live = slot_ids < cnt.unsqueeze(1)
        safe_tok = tok.clamp_min(0)
        q_left = _untried_mass(q_row, safe_tok, live)
        dense = (p_row - a.unsqueeze(1) * q_row).clamp_min(0).sum(-1)
        p_t, q_t = p_row.gather(1, safe_tok), q_row.gather(1, safe_tok)
        frozen = (p_t - val * q_t).clamp_min(0)
        moving = (p_t - a.unsqueeze(1) * q_t).clamp_min(0)
        return dense + torch.where(live, frozen - moving, 0.0).sum(-1), q_left

    for _ in range(n - 1):
        active = (cur >= 0) & (count < depth)
        safe = cur.clamp_min(0)
        x = cand[rows, safe]
        x_ok = (x >= 0) & (x < vocab)
        xs = x.clamp(0, vocab - 1)
        p_x = target_probs[rows, last, xs].to(f32)
        live = slot_ids < tried_cnt.unsqueeze(1)
        dup_hits = live & (tried_tok == x.unsqueeze(1))
        dup = dup_hits.any(1)
        dup_val = torch.where(dup_hits, tried_val, 0.0).sum(1)
        # Target-only rule.
        eff = torch.where(dup, 0.0, p_x)
        acc_new = prob_acc + eff
        u_parent = coins[rows, last]
        accept_to = (u_parent < acc_new / threshold_acc) | (eff >= threshold_single)
        # Recursive rejection sampling rule.
        if has_q:
            q_x = draft_probs[rows, last, xs].to(f32)
            a_x = torch.where(dup, dup_val, coef)
            r_x = (p_x - a_x * q_x).clamp_min(0)
            q_eff = torch.where(dup | (q_left <= 0), 0.0, q_x)
            u_child = coins[rows, (safe - 1).clamp_min(0)]
            accept_rrs = u_child * q_eff * norm < r_x * q_left
            accept = torch.where(rrs, accept_rrs, accept_to)
        else:
            accept = accept_to
        accept = active & x_ok & accept
        reject = active & ~accept
        # Record a rejection at this parent.
        append = reject & ~dup & x_ok
        slot = tried_cnt.clamp_max(cap - 1)
        if has_q:
            new_coef = torch.where(q_left > 0, coef + norm / q_left.clamp_min(1e-30), coef)
            store_val = torch.where(rrs, new_coef, eff)
        else:
            store_val = eff
        tried_tok[rows, slot] = torch.where(append, xs, tried_tok[rows, slot])
        tried_val[rows, slot] = torch.where(append, store_val, tried_val[rows, slot])
        tried_cnt = tried_cnt + append.to(torch.int64)
        prob_acc = torch.where(reject, acc_new, prob_acc)
        if has_q:
            coef = torch.where(reject & rrs, new_coef, coef)
            if cpu_branches(device):
                mass, untried = _residual_mass_cpu(
                    target_probs, draft_probs, last, reject & rrs, coef, tried_tok, tried_val,
                    tried_cnt,
                )
            else:
                p_row = row_probs(target_probs, last)
                q_row = row_probs(draft_probs, last)
                mass, untried = residual_mass(p_row, q_row, coef, tried_tok, tried_val,
                                              tried_cnt)
            norm = torch.where(reject & rrs, mass, norm)
            # q's mass left untried, summed over the untried tokens: subtracting each tried
            # q(x) from the running mass cancels catastrophically once the tried children
            # hold nearly all of q (a peaked draft), and q_i(c) = q(c) / q_left would be off.
            q_left = torch.where(reject & rrs, untried, q_left)
        # Move: down on acceptance, right on rejection.
        count = count + accept.to(torch.int64)
        idx = count.clamp_max(depth)
        path[rows, idx] = torch.where(accept, safe, path[rows, idx])
        last = torch.where(accept, safe, last)
        cur = torch.where(accept, nt[rows, safe], torch.where(active, ns[rows, safe], cur))
        # Reset the per-parent state where a child was accepted.
        prob_acc = torch.where(accept, 0.0, prob_acc)
        tried_cnt = torch.where(accept, 0, tried_cnt)
        coef = torch.where(accept, 0.0, coef)
        if draft_probs is not None:
            # A node the walk will not look below (a leaf, or at the depth limit) needs no
            # masses: with no child tried, both rules draw the final token from p.
            grows = accept & (count < depth) & (nt[rows, last] >= 0)
            q_left, norm = _accepted_masses(
                target_probs, draft_probs, accept, grows, last, q_left, norm
            )
            rrs = torch.where(accept, q_left > 0, rrs)

    if cpu_branches(device):
        bonus = _final_token_cpu(
            target_probs, draft_probs, last, rrs, coef, tried_tok, tried_val, tried_cnt,
            final_coins,
        )
    else:
        p_row = row_probs(target_probs, last)
        weights = _final_weights(
            p_row, None if not has_q else row_probs(draft_probs, last), rrs if has_q else None,
            coef, tried_tok, tried_val, tried_cnt,
        )
        weights = torch.where(weights.sum(-1, keepdim=True) > 0, weights, p_row)
        bonus = inverse_cdf_sample(weights, final_coins)
    return assemble_result(candidates, retrieve_index, path, count, bonus)


def cpu_branches(device: torch.device) -> bool:
    """Whether the walk uses the CPU-tuned branches (rows read on demand, with host-side
    branching) rather than the accelerators' (every request's rows, no host synchronisation)."""
    return device.type == "cpu"


def _node_mass(probs: torch.Tensor, requests: torch.Tensor, node: torch.Tensor) -> torch.Tensor:
    """Float32 row sums of probs[requests, node] ([k]), in probs' dtype like `probs.sum(-1)`.

    A lone row is reduced beside a copy of itself on CPU: torch may split a single output's
    reduction across threads, which a [b, N] reduction would not have done."""
    b, n, vocab = probs.shape
    index = requests * n + node
    lone = probs.device.type == "cpu" and index.shape[0] == 1 and b * n > 1
    if lone:
        index = index.repeat(2)
    try:
        flat = probs.view(b * n, vocab)
    except RuntimeError:
        flat = probs.reshape(b * n, vocab)
    mass = flat.index_select(0, index).sum(-1).to(torch.float32)
    return mass[:1] if lone else mass


def _accepted_masses(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    accept: torch.Tensor,
    grows: torch.Tensor,
    last: torch.Tensor,
    q_left: torch.Tensor,
    norm: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """(q_left, norm) with the accepted requests' entries reset: to the q and p masses of their
    new node where the walk goes on below it (`grows`), to 0 elsewhere (on CPU only the growing
    requests' rows are read; elsewhere every request's, without a host synchronisation)."""
    zero = torch.zeros_like(q_left)
    if not cpu_branches(target_probs.device):
        rows = torch.arange(last.shape[0], device=last.device)
        q_new = torch.where(grows, _node_mass(draft_probs, rows, last), zero)
        p_new = torch.where(grows, _node_mass(target_probs, rows, last), zero)
        return torch.where(accept, q_new, q_left), torch.where(accept, p_new, norm)
    q_left = torch.where(accept, zero, q_left)
    norm = torch.where(accept, zero, norm)
    moved = grows.nonzero().squeeze(1)
    if moved.numel():
        q_left[moved] = _node_mass(draft_probs, moved, last[moved])
        norm[moved] = _node_mass(target_probs, moved, last[moved])
    return q_left, norm


def _final_weights(
    p_row: torch.Tensor,
    q_row: torch.Tensor | None,
    rrs: torch.Tensor | None,
    coef: torch.Tensor,
    tried_tok: torch.Tensor,
    tried_val: torch.Tensor,
    tried_cnt: torch.Tensor,
) -> torch.Tensor:
    """The residual rows [k, V] at the last accepted node, before the no-mass fallback.

    `p_row` / `q_row` float32 rows (`q_row` and `rrs` None: target-only rule for every row)."""
    vocab = p_row.shape[1]
    slot_ids = torch.arange(tried_tok.shape[1], device=p_row.device).unsqueeze(0)
    live = slot_ids < tried_cnt.unsqueeze(1)
    safe_tok = tried_tok.clamp(0, vocab - 1)
    p_tried = p_row.gather(1, safe_tok)
    # Tried tokens are distinct among the live slots, so adding deltas overrides them exactly.
    weights = p_row.scatter_add(1, safe_tok, torch.where(live, -p_tried, 0.0)).clamp_min(0)
    if q_row is not None:
        q_tried = q_row.gather(1, safe_tok)
        moving = (p_row - coef.unsqueeze(1) * q_row).clamp_min(0)
        frozen = (p_tried - tried_val * q_tried).clamp_min(0)
        delta = frozen - (p_tried - coef.unsqueeze(1) * q_tried).clamp_min(0)
        weights_rrs = moving.scatter_add(1, safe_tok, torch.where(live, delta, 0.0))
        weights = torch.where(rrs.unsqueeze(1), weights_rrs, weights)
    return weights


def _node_rows(probs: torch.Tensor, requests: torch.Tensor, node: torch.Tensor) -> torch.Tensor:
    """Float32 rows probs[requests, node] ([k, V], fresh)."""
    b, n, vocab = probs.shape
    return take_rows_float32(probs.reshape(b * n, vocab), requests * n + node)


def _final_token_cpu(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    last: torch.Tensor,
    rrs: torch.Tensor,
    coef: torch.Tensor,
    tried_tok: torch.Tensor,
    tried_val: torch.Tensor,
    tried_cnt: torch.Tensor,
    final_coins: torch.Tensor,
) -> torch.Tensor:
    """The final token on CPU, in cache-sized chunks of requests (same values as the dense
    path): each request's row at its last node is read once and reused while hot."""
    b, _, vocab = target_probs.shape
    device = target_probs.device
    bonus = torch.empty(b, dtype=torch.int64, device=device)
    slot_ids = torch.arange(tried_tok.shape[1], device=device).unsqueeze(0)
    for start, stop in cpu_row_chunks(b, vocab):
        requests = torch.arange(start, stop, device=device)
        nodes = last[start:stop]
        p_rows = _node_rows(target_probs, requests, nodes)  # fresh: modified in place below
        live = slot_ids < tried_cnt[start:stop].unsqueeze(1)
        safe_tok = tried_tok[start:stop].clamp(0, vocab - 1)
        p_tried = p_rows.gather(1, safe_tok)
        rrs_rows = torch.empty(0, dtype=torch.int64, device=device)
        if draft_probs is not None:
            rrs_rows = rrs[start:stop].nonzero().squeeze(1)
        if rrs_rows.numel():
            a = coef[start:stop].unsqueeze(1)
            q_rows = _node_rows(draft_probs, requests, nodes)
            q_tried = q_rows.gather(1, safe_tok)
            moving = torch.sub(p_rows, a * q_rows, out=q_rows).clamp_min_(0)
            frozen = (p_tried - tried_val[start:stop] * q_tried).clamp_min(0)
            delta = frozen - (p_tried - a * q_tried).clamp_min(0)
            moving.scatter_add_(1, safe_tok, torch.where(live, delta, 0.0))
        # Target-only rule: tried tokens are distinct among the live slots, so adding -p zeroes
        # them exactly.
        weights = p_rows.scatter_add_(1, safe_tok, torch.where(live, -p_tried, 0.0)).clamp_min_(0)
        if rrs_rows.numel():
            weights[rrs_rows] = moving[rrs_rows]
        empty = (~(weights.sum(-1) > 0)).nonzero().squeeze(1)
        if empty.numel():
            weights[empty] = _node_rows(target_probs, requests[empty], nodes[empty])
        cdf = torch.cumsum(weights, -1)
        bonus[start:stop] = inverse_cdf_from_cdf(
            weights, cdf, final_coins[start:stop], nonnegative=rrs_rows.numel() == 0 and empty.numel() == 0,
        )
    return bonus


def _residual_mass_cpu(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    last: torch.Tensor,
    need: torch.Tensor,
    coef: torch.Tensor,
    tried_tok: torch.Tensor,
    tried_val: torch.Tensor,
    tried_cnt: torch.Tensor,
) -> torch.Tensor:
    """Residual mass [b] at `last` and q's untried mass [b] there (`_untried_mass`), computed
    only for the requests in `need` (0 elsewhere).

    Same per-row arithmetic as the dense path. A row sum over one output row may be split across
    threads by torch, so a lone needed row is reduced beside a copy of itself whenever the dense
    path (b > 1 rows) would not have split it."""
    b, _, vocab = target_probs.shape
    mass = torch.zeros(b, dtype=torch.float32, device=target_probs.device)
    untried = torch.zeros(b, dtype=torch.float32, device=target_probs.device)
    needed = need.nonzero().squeeze(1)
    for start, stop in cpu_row_chunks(needed.shape[0], vocab):
        requests = needed[start:stop]
        if requests.shape[0] == 1 and b > 1:
            requests = requests.repeat(2)
        p_rows = _node_rows(target_probs, requests, last[requests])
        q_rows = _node_rows(draft_probs, requests, last[requests])
        a = coef[requests]
        slot_ids = torch.arange(tried_tok.shape[1], device=tried_tok.device).unsqueeze(0)
        live = slot_ids < tried_cnt[requests].unsqueeze(1)
        safe_tok = tried_tok[requests].clamp_min(0)
        p_t = p_rows.gather(1, safe_tok)
        q_t = q_rows.gather(1, safe_tok)
        rows_untried = _untried_mass(q_rows, safe_tok, live)
        dense = torch.sub(p_rows, a.unsqueeze(1) * q_rows, out=q_rows).clamp_min_(0).sum(-1)
        frozen = (p_t - tried_val[requests] * q_t).clamp_min(0)
        moving = (p_t - a.unsqueeze(1) * q_t).clamp_min(0)
        rows_mass = dense + torch.where(live, frozen - moving, 0.0).sum(-1)
        count = stop - start
        mass[requests[:count]] = rows_mass[:count]
        untried[requests[:count]] = rows_untried[:count]
    return mass, untried


def _untried_mass(q_rows: torch.Tensor, tried: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
    """sum of `q_rows` [k, V] over the tokens not among the live `tried` ones ([k, cap])."""
    hits = torch.zeros_like(q_rows).scatter_add_(1, tried, live.to(q_rows.dtype))
    return torch.where(hits > 0, 0.0, q_rows).sum(-1)
