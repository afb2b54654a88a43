"""Tree sampling in torch: the walk vectorised over requests and levels (the CPU path, and CUDA
without Triton).

Target-only: `sibling_order` ranks the sibling chains by pointer jumping, and
`target_only_walk` decides every parent's children at once (a parent's decisions depend only on
its own children and coin, not on the path), then follows the first accepted child per level:
`depth` small steps instead of N - 1 walk steps. The final token is raced from one read of its
row (`specreg.kernels.tree_residual_draw`), keyed by (request key, role, absolute position):
`final_lanes`.

The acceptance coins come in `TreeSamplingInputs` (`specreg.kernels.tree_coins`).

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

from specreg.kernels.random_stream import draw_lanes_torch
from specreg.kernels.random_stream.types import RESIDUAL_ROLE
from specreg.kernels.row_chunks import cpu_row_chunks, take_rows_float32
from specreg.kernels.tree_residual_draw import final_tokens
from specreg.kernels.tree_verify_greedy import assemble_result
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs


def verify_tree_sampling_torch(inputs: TreeSamplingInputs) -> TreeVerifyResult:
    """Tree sampling of `inputs`: target-only decided for every node at once
    (`target_only_walk`), recursive rejection walked in N - 1 steps vectorised over requests;
    the final token in one read of its row (`final_tokens`)."""
    candidates, retrieve_index = inputs.candidates, inputs.retrieve_index
    thresholds = (inputs.threshold_single, inputs.threshold_acc)
    if inputs.draft_probs is None:
        path, count, last, tried = target_only_walk(
            candidates, inputs.next_token, inputs.next_sibling, inputs.target_probs,
            inputs.coins, depth=inputs.depth, thresholds=thresholds,
        )
        tokens = candidates.to(torch.int64)
        lanes = final_lanes(inputs, last, count)
        bonus = final_tokens(inputs.target_probs, None, last, None, None, tokens, None, tried, lanes)
        return assemble_result(candidates, retrieve_index, path, count, bonus)
    return _rejection_walk(inputs)


def final_lanes(inputs: TreeSamplingInputs, last: torch.Tensor, count: torch.Tensor) -> torch.Tensor:
    """int64 [b, 2] key lanes of each request's final draw: (its key, the RESIDUAL role, positions
    + depth of its last accepted node), whether a child was tried there or not. Never the SAMPLE
    role: a tree drafter draws its children from that role's values at the same position, and a
    tree pruned by those draws may end at a leaf because of them, so the final draw must not
    read them (`last` is unused: the position is the walk's depth)."""
    return draw_lanes_torch(inputs.keys, RESIDUAL_ROLE, inputs.positions.to(torch.int64) + count)


def _rejection_walk(inputs: TreeSamplingInputs) -> TreeVerifyResult:
    """The walk with q: recursive rejection where the parent's q row has mass, else the
    target-only rule. A residual mass is computed only where a next sibling will test it."""
    candidates, retrieve_index = inputs.candidates, inputs.retrieve_index
    next_token, next_sibling = inputs.next_token, inputs.next_sibling
    target_probs, draft_probs = inputs.target_probs, inputs.draft_probs
    coins, child_coins, depth = inputs.coins, inputs.child_coins, inputs.depth
    threshold_single, threshold_acc = inputs.threshold_single, inputs.threshold_acc
    b, n, vocab = target_probs.shape
    device = candidates.device
    f32 = torch.float32
    rows = torch.arange(b, device=device)
    cand = candidates.to(torch.int64)
    nt, ns = next_token.to(torch.int64), next_sibling.to(torch.int64)
    coins, child_coins = coins.to(f32), child_coins.to(f32)
    cap = max(n - 1, 1)
    slot_ids = torch.arange(cap, device=device).unsqueeze(0)
    # Masses only of the nodes the walk looks below (the root here, accepted nodes below).
    root = torch.zeros_like(rows)
    q_left = _node_mass(draft_probs, rows, root)
    norm = _node_mass(target_probs, rows, root)
    rrs = q_left > 0
    path = torch.full((b, depth + 1), -1, dtype=torch.int64, device=device)
    path[:, 0] = 0
    last = torch.zeros(b, dtype=torch.int64, device=device)
    cur = nt[:, 0].clone()
    count = torch.zeros(b, dtype=torch.int64, device=device)
    prob_acc = torch.zeros(b, dtype=f32, device=device)
    tried_tok = torch.full((b, cap), -1, dtype=torch.int64, device=device)
    tried_val = torch.zeros(b, cap, dtype=f32, device=device)  # removed p (TO) or coefficient (RRS)
    tried_cnt = torch.zeros(b, dtype=torch.int64, device=device)
    coef = torch.zeros(b, dtype=f32, device=device)
    flat_p, flat_q = target_probs.reshape(b * n, vocab), draft_probs.reshape(b * n, vocab)
    host_branches = cpu_branches(device)
    for _ in range(n - 1):
        active = (cur >= 0) & (count < depth)
        if host_branches and not bool(active.any()):
            break  # every walk has ended (the CPU branch may synchronise)
        safe = cur.clamp_min(0)
        x = cand.gather(1, safe.unsqueeze(1)).squeeze(1)
        x_ok = (x >= 0) & (x < vocab)
        xs = x.clamp(0, vocab - 1)
        at = rows * n + last
        p_x = flat_p[at, xs].to(f32)
        q_x = flat_q[at, xs].to(f32)
        dup_hits = (slot_ids < tried_cnt.unsqueeze(1)) & (tried_tok == x.unsqueeze(1))
        dup = dup_hits.any(1)
        eff = torch.where(dup, 0.0, p_x)
        acc_new = prob_acc + eff
        u_parent = coins.gather(1, last.unsqueeze(1)).squeeze(1)
        accept_to = (u_parent < acc_new / threshold_acc) | (eff >= threshold_single)
        a_x = torch.where(dup, (dup_hits * tried_val).sum(1), coef)
        r_x = (p_x - a_x * q_x).clamp_min(0)
        q_eff = torch.where(dup | (q_left <= 0), 0.0, q_x)
        u_child = child_coins.gather(1, safe.unsqueeze(1)).squeeze(1)
        accept_rrs = u_child * q_eff * norm < r_x * q_left
        accept = active & x_ok & torch.where(rrs, accept_rrs, accept_to)
        reject = active & ~accept
        append = reject & ~dup & x_ok
        slot = tried_cnt.clamp_max(cap - 1).unsqueeze(1)
        new_coef = torch.where(q_left > 0, coef + norm / q_left.clamp_min(1e-30), coef)
        store_val = torch.where(rrs, new_coef, eff)
        tried_tok.scatter_(1, slot, torch.where(append, xs, tried_tok.gather(1, slot).squeeze(1)).unsqueeze(1))
        tried_val.scatter_(1, slot, torch.where(append, store_val, tried_val.gather(1, slot).squeeze(1)).unsqueeze(1))
        tried_cnt = tried_cnt + append.to(torch.int64)
        prob_acc = torch.where(reject, acc_new, prob_acc)
        coef = torch.where(reject & rrs, new_coef, coef)
        # The residual mass matters only to a sibling still to be tested at this parent.
        sibling = ns.gather(1, safe.unsqueeze(1)).squeeze(1)
        need = reject & rrs & (sibling >= 0)
        if cpu_branches(device):
            mass, untried = _residual_mass_cpu(
                target_probs, draft_probs, last, need, coef, tried_tok, tried_val, tried_cnt
            )
        else:
            mass, untried = _residual_mass(flat_p[at].to(f32), flat_q[at].to(f32), coef, tried_tok,
                                  tried_val, tried_cnt)  # fmt: skip
        norm = torch.where(need, mass, norm)
        # q's mass left untried, summed over the untried tokens: subtracting each tried q(x)
        # from the running mass cancels catastrophically once the tried children hold nearly
        # all of q (a peaked draft), and q_i(c) = q(c) / q_left would be off.
        q_left = torch.where(need, untried, q_left)
        # Move: down on acceptance, right on rejection.
        count = count + accept.to(torch.int64)
        path.scatter_(1, count.clamp_max(depth).unsqueeze(1),
                      torch.where(accept, safe, path.gather(1, count.clamp_max(depth).unsqueeze(1)).squeeze(1)).unsqueeze(1))
        last = torch.where(accept, safe, last)
        child = nt.gather(1, safe.unsqueeze(1)).squeeze(1)
        cur = torch.where(accept, child, torch.where(active, sibling, cur))
        prob_acc = torch.where(accept, 0.0, prob_acc)
        tried_cnt = torch.where(accept, 0, tried_cnt)
        coef = torch.where(accept, 0.0, coef)
        # A node the walk will not look below (a leaf, or at the depth limit) needs no masses.
        grows = accept & (count < depth) & (child >= 0)
        q_left, norm = _accepted_masses(
            target_probs, draft_probs, accept, grows, last, q_left, norm
        )
        rrs = torch.where(accept, q_left > 0, rrs)
    live = slot_ids < tried_cnt.unsqueeze(1)
    bonus = final_tokens(target_probs, draft_probs, last, rrs, coef, tried_tok, tried_val, live,
                         final_lanes(inputs, last, count))  # fmt: skip
    return assemble_result(candidates, retrieve_index, path, count, bonus)


def _residual_mass(p_row, q_row, a, tok, val, cnt):
    """(residual mass max(p - a q, 0) of full rows [b, V], the tried tokens at their frozen
    coefficients; q's untried mass) (the accelerators' branch: every request's row, no host
    synchronisation)."""
    dense = (p_row - a.unsqueeze(1) * q_row).clamp_min(0).sum(-1)
    live = torch.arange(tok.shape[1], device=tok.device).unsqueeze(0) < cnt.unsqueeze(1)
    safe_tok = tok.clamp_min(0)
    p_t, q_t = p_row.gather(1, safe_tok), q_row.gather(1, safe_tok)
    frozen = (p_t - val * q_t).clamp_min(0)
    moving = (p_t - a.unsqueeze(1) * q_t).clamp_min(0)
    return dense + torch.where(live, frozen - moving, 0.0).sum(-1), _untried_mass(q_row, safe_tok, live)


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
    if probs.device.type != "cpu" or probs.dtype != torch.float32:
        mass = flat.index_select(0, index).sum(-1).to(torch.float32)
    else:  # rows gathered chunk by chunk into one cache-sized buffer, summed while hot
        mass = torch.empty(index.shape[0], dtype=torch.float32, device=probs.device)
        chunks = cpu_row_chunks(index.shape[0], vocab)
        buffer = torch.empty(chunks[0][1] if chunks else 0, vocab, dtype=probs.dtype,
                             device=probs.device)  # fmt: skip
        for start, stop in chunks:
            rows = take_rows_float32(flat, index[start:stop], out=buffer)
            torch.sum(rows, -1, out=mass[start:stop])
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


def _node_rows(
    probs: torch.Tensor, requests: torch.Tensor, node: torch.Tensor, out: torch.Tensor
) -> torch.Tensor:
    """Float32 rows probs[requests, node] ([k, V]), in `out` where probs is float32."""
    b, n, vocab = probs.shape
    return take_rows_float32(probs.reshape(b * n, vocab), requests * n + node, out=out)


def _residual_mass_cpu(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor,
    last: torch.Tensor,
    need: torch.Tensor,
    coef: torch.Tensor,
    tried_tok: torch.Tensor,
    tried_val: torch.Tensor,
    tried_cnt: torch.Tensor,
) -> tuple[torch.Tensor, torch.Tensor]:
    """Residual mass [b] at `last` and q's untried mass [b] there (`_untried_mass`), computed
    only for the requests in `need` (0 elsewhere).

    Same per-row arithmetic as the dense path. A row sum over one output row may be split across
    threads by torch, so a lone needed row is reduced beside a copy of itself whenever the dense
    path (b > 1 rows) would not have split it."""
    b, _, vocab = target_probs.shape
    mass = torch.zeros(b, dtype=torch.float32, device=target_probs.device)
    untried = torch.zeros(b, dtype=torch.float32, device=target_probs.device)
    needed = need.nonzero().squeeze(1)
    chunks = cpu_row_chunks(needed.shape[0], vocab)
    rows = max(2, chunks[0][1]) if chunks else 0
    p_buffer = torch.empty(rows, vocab, dtype=torch.float32, device=target_probs.device)
    q_buffer = torch.empty_like(p_buffer)
    for start, stop in chunks:
        requests = needed[start:stop]
        if requests.shape[0] == 1 and b > 1:
            requests = requests.repeat(2)
        p_rows = _node_rows(target_probs, requests, last[requests], p_buffer)
        q_rows = _node_rows(draft_probs, requests, last[requests], q_buffer)
        a = coef[requests]
        slot_ids = torch.arange(tried_tok.shape[1], device=tried_tok.device).unsqueeze(0)
        live = slot_ids < tried_cnt[requests].unsqueeze(1)
        safe_tok = tried_tok[requests].clamp_min(0)
        p_t = p_rows.gather(1, safe_tok)
        q_t = q_rows.gather(1, safe_tok)
        rows_untried = _untried_mass(q_rows, safe_tok, live)
        dense = torch.addcmul(p_rows, q_rows, a.unsqueeze(1), value=-1.0, out=q_rows)
        dense = dense.clamp_min_(0).sum(-1)
        frozen = (p_t - tried_val[requests] * q_t).clamp_min(0)
        moving = (p_t - a.unsqueeze(1) * q_t).clamp_min(0)
        rows_mass = dense + torch.where(live, frozen - moving, 0.0).sum(-1)
        count = stop - start
        mass[requests[:count]] = rows_mass[:count]
        untried[requests[:count]] = rows_untried[:count]
    return mass, untried


def sibling_order(next_token: torch.Tensor, next_sibling: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """(parent, rank), int64 [b, N]: a node's parent (-1: the root, or not linked below any
    node) and its place in its parent's sibling chain (0 = first child)."""
    b, n = next_token.shape
    device = next_token.device
    nt, ns = next_token.to(torch.int64), next_sibling.to(torch.int64)
    nodes = torch.arange(n, device=device).expand(b, n)
    spill = torch.full((b, n + 1), -1, dtype=torch.int64, device=device)  # column n: no link
    prev = spill.clone().scatter_(1, torch.where(ns >= 0, ns, n), nodes)[:, :n]
    first_parent = spill.scatter_(1, torch.where(nt >= 0, nt, n), nodes)[:, :n]
    # List ranking along the prev-sibling chains: each chain head points at itself (distance 0).
    anchor = torch.where(prev >= 0, prev, nodes)
    rank = (prev >= 0).to(torch.int64)
    for _ in range(max(n - 1, 1).bit_length()):
        rank = rank + rank.gather(1, anchor)
        anchor = anchor.gather(1, anchor)
    return first_parent.gather(1, anchor), rank


def target_only_walk(
    candidates: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    target_probs: torch.Tensor,
    coins: torch.Tensor,
    *,
    depth: int,
    thresholds: tuple[float, float],
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, torch.Tensor]:
    """(path [b, depth + 1], count [b], last [b], tried [b, N] bool) of the target-only rule.

    `tried` marks the children of `last` that were tried and rejected (none at the depth
    limit), each token once: the final token is drawn from p at `last` without them."""
    b, n, vocab = target_probs.shape
    device = candidates.device
    parent, rank = sibling_order(next_token, next_sibling)
    child = parent >= 0
    x = candidates.to(torch.int64)
    x_ok = child & (x >= 0) & (x < vocab)
    xs = x.clamp(0, vocab - 1)
    safe_parent = parent.clamp_min(0)
    rows = torch.arange(b, device=device).unsqueeze(1)
    p_x = target_probs[rows, safe_parent, xs].to(torch.float32)
    # earlier[r, c, j]: j is a sibling tried before c (so rejected whenever c is tried).
    earlier = (parent.unsqueeze(2) == parent.unsqueeze(1)) & (rank.unsqueeze(1) < rank.unsqueeze(2))
    earlier &= x_ok.unsqueeze(1)
    dup = (earlier & (xs.unsqueeze(1) == xs.unsqueeze(2))).any(2)
    eff = torch.where(dup | ~x_ok, 0.0, p_x)
    tried_mass = eff + (earlier.to(torch.float32) @ eff.unsqueeze(2)).squeeze(2)
    single, acc = thresholds
    coin = coins.to(torch.float32).gather(1, safe_parent)
    accept = x_ok & ((coin < tried_mass / acc) | (eff >= single))
    # The first accepted child of each parent (smallest rank), -1 where every child is rejected.
    none = n * n
    key = torch.where(accept, rank * n + torch.arange(n, device=device), none)
    first = torch.full((b, n + 1), none, dtype=torch.int64, device=device)
    first.scatter_reduce_(1, torch.where(child, parent, n), key, "amin")
    chosen = torch.where(first[:, :n] < none, first[:, :n] % n, -1)
    path = torch.full((b, depth + 1), -1, dtype=torch.int64, device=device)
    path[:, 0] = 0
    last = torch.zeros(b, dtype=torch.int64, device=device)
    count = torch.zeros(b, dtype=torch.int64, device=device)
    for level in range(1, depth + 1):
        step = chosen.gather(1, last.unsqueeze(1)).squeeze(1)
        moved = (step >= 0) & (count == level - 1)
        if cpu_branches(device) and not bool(moved.any()):
            break  # no walk goes deeper (the CPU branch may synchronise)
        path[:, level] = torch.where(moved, step, -1)
        last = torch.where(moved, step, last)
        count = count + moved.to(torch.int64)
    tried = x_ok & ~dup & (parent == last.unsqueeze(1)) & (count < depth).unsqueeze(1)
    return path, count, last, tried


def _untried_mass(q_rows: torch.Tensor, tried: torch.Tensor, live: torch.Tensor) -> torch.Tensor:
    """sum of `q_rows` [k, V] over the tokens not among the live `tried` ones ([k, cap])."""
    hits = torch.zeros_like(q_rows).scatter_add_(1, tried, live.to(q_rows.dtype))
    return torch.where(hits > 0, 0.0, q_rows).sum(-1)
