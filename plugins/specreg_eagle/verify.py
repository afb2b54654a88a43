"""EAGLE tree verification: greedy and lossless sampling over the tree `build_tree` produced.

Layout (b requests, N tree nodes, V vocab): `candidates` [b, N] are the node tokens (node 0 =
root = bonus token of the previous step); `retrieve_index` [b, N] maps a node to its flat row
r*N + i; `retrieve_next_token` / `retrieve_next_sibling` [b, N] are the first-child / next-sibling
links (-1 = none), children in ascending local index, parents before children. Row i of
`target_logits` / `target_probs` [b, N, V] is the target's distribution for the token FOLLOWING
node i; row i of `draft_probs` [b, N, V] is q, the distribution node i's children were drawn from.

Greedy: the accepted path is the longest root path whose every token equals the target's argmax
at its parent (the first matching child in sibling order); the bonus is the argmax at the last
accepted node.

Sampling, per parent node P (reset whenever a child is accepted):
- Target-only (no `draft_probs`, or P's q row is all zero): children c_1 < c_2 < ... are tried
  with P's coin u = coins[:, P]; accept c_i when `u < (p(c_1) + ... + p(c_i)) / threshold_acc`
  or `p(c_i) >= threshold_single`, counting a token already tried at P as 0. With thresholds 1.0
  a child is accepted with probability exactly p(c_i) and otherwise the residual is p with the
  tried tokens removed: the emitted token is distributed as p for any fixed set of children.
- Recursive rejection sampling (P's q row has mass; thresholds are not used): the children must
  have been drawn from q WITHOUT replacement, in sibling order. With residual target p_i
  (p_1 = p) and q_i = q without the tokens drawn before c_i, renormalised, c_i is accepted when
  `coins[:, c_i - 1] * q_i(c_i) < p_i(c_i)`; on rejection p_{i+1} = norm(max(p_i - q_i, 0)).
  Each step emits exactly p_i, so the node emits exactly p. p_i is never materialised: it equals
  max(p - a_i q, 0) / W_i with a scalar a_i for untried tokens and a frozen coefficient per tried
  token (at most N - 1 per node, kept sparsely), and W_i is one reduction over the row.
- Final token: drawn by inverse CDF (`final_coins`) from the residual at the last accepted node
  (p itself when no child was tried); a residual with no mass (rounding) falls back to p.

No [b, N, V] temporaries, the caller's tensors are never written, no host synchronisation.
"""

from __future__ import annotations

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
    should_check_values,
)
from specreg.kernels.filtering.torch_impl import RowStats, filtered_rows, gathered_row_stats
from specreg.kernels.sampling import inverse_cdf_sample, request_coins
from specreg.kernels.sampling.torch_impl import (
    cpu_row_chunks,
    inverse_cdf_from_cdf,
    take_rows_float32,
)
from specreg.sampling_params import SamplingParams, require_params

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is an optional extra
    triton = None

DEFAULT_BLOCK_V = 1024


@attrs.frozen(kw_only=True)
class TreeVerifyResult:
    """Outcome of verifying one tree per request (D = depth + 1 slots).

    - `predicts` int64 [b*N]: for each node on the accepted path, the token emitted after it
      (the next accepted draft, or the bonus at the last node); -1 elsewhere.
    - `accept_index` int64 [b, D]: retrieve_index of the accepted path (root first), -1 padded.
    - `accept_token_num` int32 [b]: accepted drafts, not counting the bonus.
    - `bonus` int64 [b]: the token emitted after the accepted drafts.
    - `output_tokens` int64 [b, D]: the accepted drafts, then the bonus, then -1.
    - `param_error` bool [b] (with sampling parameters only): requests whose parameters were
      invalid and unchecked (GPU); they accept nothing and emit -1.
    """

    predicts: torch.Tensor
    accept_index: torch.Tensor
    accept_token_num: torch.Tensor
    bonus: torch.Tensor
    output_tokens: torch.Tensor
    param_error: torch.Tensor | None = None

    @property
    def accept_len(self) -> torch.Tensor:
        """Accepted drafts per request (same as `accept_token_num`)."""
        return self.accept_token_num

    @property
    def num_emitted(self) -> torch.Tensor:
        return self.accept_token_num + 1


# ---------------------------------------------------------------------------------------------
# Validation
# ---------------------------------------------------------------------------------------------


def _check_tree_inputs(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    depth: int,
) -> tuple[int, int]:
    check_shape("candidates", candidates, (None, None))
    b, n = candidates.shape
    if n < 1:
        raise KernelInputError(
            problem("SR900", "candidates has no root column", accepted="[b, N] with N >= 1",
                    fix="pass the tree's tokens including the root", field="candidates")
        )
    for name, tensor in (
        ("candidates", candidates),
        ("retrieve_index", retrieve_index),
        ("retrieve_next_token", next_token),
        ("retrieve_next_sibling", next_sibling),
    ):
        check_shape(name, tensor, (b, n))
        check_dtype(name, tensor, INDEX_DTYPES)
    if isinstance(depth, bool) or not isinstance(depth, int) or depth < 1:
        raise KernelInputError(
            problem("SR904", f"depth must be an int >= 1, got {depth!r}", accepted="int >= 1",
                    fix="pass num_steps of the draft loop", field="depth")
        )
    return b, n


def _check_tree_rows(b: int, n: int, **rows: torch.Tensor | None) -> int:
    """Shapes and dtypes of a target (first keyword, [b, N, V], V >= 1) and an optional draft
    (second keyword, [b, N, V]); returns V."""
    (target_name, target), (draft_name, draft) = rows.items()
    assert target is not None
    check_shape(target_name, target, (b, n, None))
    check_dtype(target_name, target, FLOAT_DTYPES)
    vocab = target.shape[2]
    if vocab < 1:
        raise KernelInputError(
            problem("SR900", f"{target_name} has an empty vocab", accepted="V >= 1",
                    fix="pass the rows over the whole vocab", field=target_name)
        )
    if draft is not None:
        check_shape(draft_name, draft, (b, n, vocab))
        check_dtype(draft_name, draft, FLOAT_DTYPES)
    return vocab


def _check_tree_values(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    vocab: int | None,
) -> None:
    b, n = candidates.shape
    if vocab is not None:
        check_index_range("candidates", candidates, 0, vocab)
    check_index_range("retrieve_index", retrieve_index, 0, b * n)
    check_index_range("retrieve_next_token", next_token, 1, n, allow=(-1,))
    check_index_range("retrieve_next_sibling", next_sibling, 1, n, allow=(-1,))


# ---------------------------------------------------------------------------------------------
# Torch implementations (vectorised over the batch; one loop of N - 1 walk steps)
# ---------------------------------------------------------------------------------------------


def _assemble(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    path: torch.Tensor,
    count: torch.Tensor,
    bonus: torch.Tensor,
) -> TreeVerifyResult:
    """Outputs from the accepted local path [b, D] (-1 padded), its draft count and the bonus."""
    b, n = candidates.shape
    slots = path.shape[1]
    k = torch.arange(slots, device=path.device).unsqueeze(0)
    nxt = torch.cat([path[:, 1:], torch.full_like(path[:, :1], -1)], 1)
    next_tok = torch.gather(candidates.to(torch.int64), 1, nxt.clamp_min(0))
    out = torch.where(k < count.unsqueeze(1), next_tok, torch.full_like(next_tok, -1))
    out = torch.where(k == count.unsqueeze(1), bonus.unsqueeze(1), out)
    on_path = path >= 0
    accept_index = torch.where(
        on_path, torch.gather(retrieve_index.to(torch.int64), 1, path.clamp_min(0)), path
    )
    predicts = torch.full((b * n,), -1, dtype=torch.int64, device=candidates.device)
    predicts[accept_index[on_path]] = out[on_path]
    return TreeVerifyResult(
        predicts=predicts,
        accept_index=accept_index,
        accept_token_num=count.to(torch.int32),
        bonus=bonus,
        output_tokens=out,
    )


def verify_tree_greedy_torch(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    target_predict: torch.Tensor,
    *,
    depth: int,
) -> TreeVerifyResult:
    b, n = candidates.shape
    device = candidates.device
    rows = torch.arange(b, device=device)
    cand = candidates.to(torch.int64)
    predict = target_predict.to(torch.int64)
    nt, ns = next_token.to(torch.int64), next_sibling.to(torch.int64)
    path = torch.full((b, depth + 1), -1, dtype=torch.int64, device=device)
    path[:, 0] = 0
    last = torch.zeros(b, dtype=torch.int64, device=device)
    cur = nt[:, 0].clone()
    count = torch.zeros(b, dtype=torch.int64, device=device)
    for _ in range(n - 1):
        active = (cur >= 0) & (count < depth)
        safe = cur.clamp_min(0)
        hit = active & (cand[rows, safe] == predict[rows, last])
        count = count + hit.to(torch.int64)
        path[rows, count.clamp_max(depth)] = torch.where(hit, safe, path[rows, count.clamp_max(depth)])
        last = torch.where(hit, safe, last)
        cur = torch.where(hit, nt[rows, safe], torch.where(active, ns[rows, safe], cur))
    bonus = predict[rows, last]
    return _assemble(candidates, retrieve_index, path, count, bonus)


def verify_tree_greedy_from_logits_torch(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    target_logits: torch.Tensor,
    *,
    depth: int,
) -> TreeVerifyResult:
    """`verify_tree_greedy_torch` of the logits' argmax, taking the argmax only of the rows the
    walk reaches: level by level, the row of each still-descending request's last accepted node
    (CPU: the argmax of every node costs a read of all N rows; the walk needs depth + 1 at most)."""
    b, n, vocab = target_logits.shape
    cand = candidates.to(torch.int64)
    nt, ns = next_token.to(torch.int64), next_sibling.to(torch.int64)
    path = torch.full((b, depth + 1), -1, dtype=torch.int64)
    path[:, 0] = 0
    count = torch.zeros(b, dtype=torch.int64)
    last = torch.zeros(b, dtype=torch.int64)
    bonus = torch.empty(b, dtype=torch.int64)
    flat = target_logits.reshape(b * n, vocab)  # a view for the usual layouts
    gathered = None  # reused across levels: a fresh block per level costs page faults
    active = torch.arange(b)
    for level in range(depth + 1):
        if active.numel() == 0:
            break
        node = last[active]
        if level == 0:
            rows = target_logits[:, 0]  # every request at its root: a view, no copy
        else:
            if gathered is None:
                gathered = flat.new_empty(active.numel(), vocab)
            rows = torch.index_select(flat, 0, active * n + node, out=gathered[: active.numel()])
        predict = row_argmax(rows)
        found = torch.full_like(predict, -1)
        if level < depth:  # first child in sibling order whose token is the argmax
            child = nt[active, node]
            pending = child >= 0
            for _ in range(n):
                if not bool(pending.any()):
                    break
                safe = child.clamp_min(0)
                hit = pending & (cand[active, safe] == predict)
                found = torch.where(hit, safe, found)
                child = ns[active, safe]
                pending &= ~hit & (child >= 0)
        stopped = found < 0
        bonus[active[stopped]] = predict[stopped]
        moving = ~stopped
        active, found = active[moving], found[moving]
        count[active] += 1
        path[active, count[active]] = found
        last[active] = found
    return _assemble(candidates, retrieve_index, path, count, bonus)


def verify_tree_sampling_torch(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    coins: torch.Tensor,
    final_coins: torch.Tensor,
    *,
    depth: int,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
) -> TreeVerifyResult:
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
        dense = (p_row - a.unsqueeze(1) * q_row).clamp_min(0).sum(-1)
        live = slot_ids < cnt.unsqueeze(1)
        safe_tok = tok.clamp_min(0)
        p_t, q_t = p_row.gather(1, safe_tok), q_row.gather(1, safe_tok)
        frozen = (p_t - val * q_t).clamp_min(0)
        moving = (p_t - a.unsqueeze(1) * q_t).clamp_min(0)
        return dense + torch.where(live, frozen - moving, 0.0).sum(-1)

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
            q_left = torch.where(append & rrs, q_left - q_x, q_left)
            coef = torch.where(reject & rrs, new_coef, coef)
            if device.type == "cpu":
                mass = _residual_mass_cpu(
                    target_probs, draft_probs, last, reject & rrs, coef, tried_tok, tried_val,
                    tried_cnt,
                )
            else:
                p_row = row_probs(target_probs, last)
                q_row = row_probs(draft_probs, last)
                mass = residual_mass(p_row, q_row, coef, tried_tok, tried_val, tried_cnt)
            norm = torch.where(reject & rrs, mass, norm)
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

    if device.type == "cpu":
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
    return _assemble(candidates, retrieve_index, path, count, bonus)


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
    if target_probs.device.type != "cpu":
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
    bonus = torch.empty(b, dtype=torch.int64)
    slot_ids = torch.arange(tried_tok.shape[1]).unsqueeze(0)
    for start, stop in cpu_row_chunks(b, vocab):
        requests = torch.arange(start, stop)
        nodes = last[start:stop]
        p_rows = _node_rows(target_probs, requests, nodes)  # fresh: modified in place below
        live = slot_ids < tried_cnt[start:stop].unsqueeze(1)
        safe_tok = tried_tok[start:stop].clamp(0, vocab - 1)
        p_tried = p_rows.gather(1, safe_tok)
        rrs_rows = torch.empty(0, dtype=torch.int64)
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
    """Residual mass [b] at `last`, computed only for the requests in `need` (0 elsewhere).

    Same per-row arithmetic as the dense path. A row sum over one output row may be split across
    threads by torch, so a lone needed row is reduced beside a copy of itself whenever the dense
    path (b > 1 rows) would not have split it."""
    b, _, vocab = target_probs.shape
    mass = torch.zeros(b, dtype=torch.float32)
    needed = need.nonzero().squeeze(1)
    for start, stop in cpu_row_chunks(needed.shape[0], vocab):
        requests = needed[start:stop]
        if requests.shape[0] == 1 and b > 1:
            requests = requests.repeat(2)
        p_rows = _node_rows(target_probs, requests, last[requests])
        q_rows = _node_rows(draft_probs, requests, last[requests])
        a = coef[requests]
        slot_ids = torch.arange(tried_tok.shape[1]).unsqueeze(0)
        live = slot_ids < tried_cnt[requests].unsqueeze(1)
        safe_tok = tried_tok[requests].clamp_min(0)
        p_t = p_rows.gather(1, safe_tok)
        q_t = q_rows.gather(1, safe_tok)
        dense = torch.sub(p_rows, a.unsqueeze(1) * q_rows, out=q_rows).clamp_min_(0).sum(-1)
        frozen = (p_t - tried_val[requests] * q_t).clamp_min(0)
        moving = (p_t - a.unsqueeze(1) * q_t).clamp_min(0)
        rows_mass = dense + torch.where(live, frozen - moving, 0.0).sum(-1)
        count = stop - start
        mass[requests[:count]] = rows_mass[:count]
    return mass


# ---------------------------------------------------------------------------------------------
# Triton implementations (one program per request; vocab streamed in BLOCK_V tiles)
# ---------------------------------------------------------------------------------------------

if triton is not None:

    @triton.jit
    def _row_argmax_kernel(logits_ptr, out_ptr, vocab, BLOCK_V: tl.constexpr):
        row = tl.program_id(0).to(tl.int64)
        offs = tl.arange(0, BLOCK_V)
        best = tl.full([], float("-inf"), tl.float32)
        best_idx = tl.full([], 0, tl.int64)
        for v0 in range(0, vocab, BLOCK_V):
            v = v0 + offs
            x = tl.load(logits_ptr + row * vocab + v, mask=v < vocab, other=float("-inf"))
            x = x.to(tl.float32)
            m = tl.max(x, axis=0)
            idx = tl.min(tl.where(x == m, v, vocab), axis=0).to(tl.int64)
            better = m > best
            best_idx = tl.where(better, idx, best_idx)
            best = tl.where(better, m, best)
        tl.store(out_ptr + row, best_idx)

    @triton.jit
    def _tree_greedy_kernel(
        cand_ptr, ridx_ptr, nt_ptr, ns_ptr, predict_ptr,
        predicts_ptr, acc_ptr, num_ptr, bonus_ptr, out_ptr,
        depth, N: tl.constexpr,
    ):
        r = tl.program_id(0).to(tl.int64)
        base = r * N
        slots = depth + 1
        tl.store(acc_ptr + r * slots, tl.load(ridx_ptr + base).to(tl.int64))
        last = tl.full([], 0, tl.int64)
        cur = tl.load(nt_ptr + base).to(tl.int64)
        count = tl.full([], 0, tl.int64)
        for _ in range(N - 1):
            active = (cur >= 0) & (count < depth)
            safe = tl.maximum(cur, 0)
            tok = tl.load(cand_ptr + base + safe).to(tl.int64)
            want = tl.load(predict_ptr + base + last).to(tl.int64)
            hit = active & (tok == want)
            last_row = tl.load(ridx_ptr + base + last).to(tl.int64)
            tl.store(predicts_ptr + last_row, tok, mask=hit)
            tl.store(out_ptr + r * slots + count, tok, mask=hit)
            cur_row = tl.load(ridx_ptr + base + safe).to(tl.int64)
            tl.store(acc_ptr + r * slots + count + 1, cur_row, mask=hit)
            count += hit.to(tl.int64)
            nxt = tl.load(nt_ptr + base + safe).to(tl.int64)
            sib = tl.load(ns_ptr + base + safe).to(tl.int64)
            last = tl.where(hit, safe, last)
            cur = tl.where(hit, nxt, tl.where(active, sib, cur))
        bonus = tl.load(predict_ptr + base + last).to(tl.int64)
        last_row = tl.load(ridx_ptr + base + last).to(tl.int64)
        tl.store(predicts_ptr + last_row, bonus)
        tl.store(out_ptr + r * slots + count, bonus)
        tl.store(num_ptr + r, count.to(tl.int32))
        tl.store(bonus_ptr + r, bonus)

    @triton.jit
    def _row_sums(p_ptr, q_ptr, row, vocab, HAS_Q: tl.constexpr, BLOCK_V: tl.constexpr):
        offs = tl.arange(0, BLOCK_V)
        p_sum = tl.zeros([BLOCK_V], tl.float32)
        q_sum = tl.zeros([BLOCK_V], tl.float32)
        for v0 in range(0, vocab, BLOCK_V):
            v = v0 + offs
            p_sum += tl.load(p_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
            if HAS_Q:
                q_sum += tl.load(q_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
        return tl.sum(p_sum, axis=0), tl.sum(q_sum, axis=0)

    @triton.jit
    def _tree_sampling_kernel(
        cand_ptr, ridx_ptr, nt_ptr, ns_ptr, p_ptr, q_ptr, coins_ptr, final_ptr,
        predicts_ptr, acc_ptr, num_ptr, bonus_ptr, out_ptr,
        vocab, depth, thr_single, thr_acc,
        N: tl.constexpr, HAS_Q: tl.constexpr, CAP: tl.constexpr, BLOCK_V: tl.constexpr,
    ):
        r = tl.program_id(0).to(tl.int64)
        base = r * N
        slots = depth + 1
        idx = tl.arange(0, CAP)
        offs = tl.arange(0, BLOCK_V)
        tried_tok = tl.full([CAP], -1, tl.int64)
        tried_val = tl.zeros([CAP], tl.float32)
        tried_p = tl.zeros([CAP], tl.float32)
        tried_q = tl.zeros([CAP], tl.float32)
        cnt = tl.full([], 0, tl.int64)
        tl.store(acc_ptr + r * slots, tl.load(ridx_ptr + base).to(tl.int64))
        last = tl.full([], 0, tl.int64)
        cur = tl.load(nt_ptr + base).to(tl.int64)
        count = tl.full([], 0, tl.int64)
        prob_acc = tl.full([], 0.0, tl.float32)
        coef = tl.full([], 0.0, tl.float32)
        norm, q_left = _row_sums(p_ptr, q_ptr, base * vocab, vocab, HAS_Q, BLOCK_V)
        rrs = q_left > 0
        for _ in range(N - 1):
            active = (cur >= 0) & (count < depth)
            safe = tl.maximum(cur, 0)
            x = tl.load(cand_ptr + base + safe).to(tl.int64)
            x_ok = (x >= 0) & (x < vocab)
            xs = tl.minimum(tl.maximum(x, 0), vocab - 1)
            row = (base + last) * vocab
            p_x = tl.load(p_ptr + row + xs).to(tl.float32)
            live = idx < cnt
            dup_hits = live & (tried_tok == xs)
            dup = tl.max(dup_hits.to(tl.int32), axis=0) > 0
            dup_val = tl.sum(tl.where(dup_hits, tried_val, 0.0), axis=0)
            eff = tl.where(dup, 0.0, p_x)
            acc_new = prob_acc + eff
            u_parent = tl.load(coins_ptr + base + last).to(tl.float32)
            accept = (u_parent < acc_new / thr_acc) | (eff >= thr_single)
            q_x = tl.full([], 0.0, tl.float32)
            new_coef = coef
            if HAS_Q:
                q_x = tl.load(q_ptr + row + xs).to(tl.float32)
                a_x = tl.where(dup, dup_val, coef)
                r_x = tl.maximum(p_x - a_x * q_x, 0.0)
                q_eff = tl.where(dup | (q_left <= 0), 0.0, q_x)
                u_child = tl.load(coins_ptr + base + tl.maximum(safe - 1, 0)).to(tl.float32)
                accept_rrs = u_child * q_eff * norm < r_x * q_left
                accept = tl.where(rrs, accept_rrs, accept)
                new_coef = tl.where(q_left > 0, coef + norm / tl.maximum(q_left, 1e-30), coef)
            accept = active & x_ok & accept
            reject = active & (~accept)
            append = reject & (~dup) & x_ok
            store_val = tl.where(rrs, new_coef, eff)
            put = append & (idx == cnt)
            tried_tok = tl.where(put, xs, tried_tok)
            tried_val = tl.where(put, store_val, tried_val)
            tried_p = tl.where(put, p_x, tried_p)
            tried_q = tl.where(put, q_x, tried_q)
            cnt += append.to(tl.int64)
            prob_acc = tl.where(reject, acc_new, prob_acc)
            if HAS_Q:
                q_left = tl.where(append & rrs, q_left - q_x, q_left)
                coef = tl.where(reject & rrs, new_coef, coef)
                if reject & rrs:
                    dense = tl.zeros([BLOCK_V], tl.float32)
                    for v0 in range(0, vocab, BLOCK_V):
                        v = v0 + offs
                        pv = tl.load(p_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
                        qv = tl.load(q_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
                        dense += tl.maximum(pv - coef * qv, 0.0)
                    live2 = idx < cnt
                    frozen = tl.maximum(tried_p - tried_val * tried_q, 0.0)
                    moving = tl.maximum(tried_p - coef * tried_q, 0.0)
                    norm = tl.sum(dense, axis=0) + tl.sum(tl.where(live2, frozen - moving, 0.0), axis=0)
            # Move down on acceptance, right on rejection.
            last_row = tl.load(ridx_ptr + base + last).to(tl.int64)
            tl.store(predicts_ptr + last_row, xs, mask=accept)
            tl.store(out_ptr + r * slots + count, xs, mask=accept)
            cur_row = tl.load(ridx_ptr + base + safe).to(tl.int64)
            tl.store(acc_ptr + r * slots + count + 1, cur_row, mask=accept)
            count += accept.to(tl.int64)
            nxt = tl.load(nt_ptr + base + safe).to(tl.int64)
            sib = tl.load(ns_ptr + base + safe).to(tl.int64)
            last = tl.where(accept, safe, last)
            cur = tl.where(accept, nxt, tl.where(active, sib, cur))
            prob_acc = tl.where(accept, 0.0, prob_acc)
            cnt = tl.where(accept, 0, cnt)
            coef = tl.where(accept, 0.0, coef)
            if HAS_Q:
                if accept:
                    norm, q_left = _row_sums(p_ptr, q_ptr, (base + last) * vocab, vocab, HAS_Q, BLOCK_V)
                    rrs = q_left > 0

        # Final draw from the residual at `last` by inverse CDF.
        row = (base + last) * vocab
        live = idx < cnt
        if HAS_Q:
            frozen = tl.maximum(tried_p - tried_val * tried_q, 0.0)
            moving = tl.maximum(tried_p - coef * tried_q, 0.0)
            delta = tl.where(rrs, frozen - moving, -tried_p)
        else:
            delta = -tried_p
        delta = tl.where(live, delta, 0.0)
        total_acc = tl.zeros([BLOCK_V], tl.float32)
        p_acc = tl.zeros([BLOCK_V], tl.float32)
        for v0 in range(0, vocab, BLOCK_V):
            v = v0 + offs
            pv = tl.load(p_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
            w = pv
            if HAS_Q:
                qv = tl.load(q_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
                w = tl.where(rrs, tl.maximum(pv - coef * qv, 0.0), pv)
            hit = (v[:, None] == tried_tok[None, :]) & live[None, :]
            w = tl.maximum(w + tl.sum(tl.where(hit, delta[None, :], 0.0), axis=1), 0.0)
            total_acc += w
            p_acc += pv
        total = tl.sum(total_acc, axis=0)
        use_p = total <= 0
        total = tl.where(use_p, tl.sum(p_acc, axis=0), total)
        target = tl.load(final_ptr + r).to(tl.float32) * total
        running = tl.full([], 0.0, tl.float32)
        found = tl.full([], -1, tl.int64)
        last_pos = tl.full([], -1, tl.int64)
        for v0 in range(0, vocab, BLOCK_V):
            v = v0 + offs
            pv = tl.load(p_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
            w = pv
            if HAS_Q:
                qv = tl.load(q_ptr + row + v, mask=v < vocab, other=0.0).to(tl.float32)
                w = tl.where(rrs, tl.maximum(pv - coef * qv, 0.0), pv)
            hit = (v[:, None] == tried_tok[None, :]) & live[None, :]
            w = tl.maximum(w + tl.sum(tl.where(hit, delta[None, :], 0.0), axis=1), 0.0)
            w = tl.where(use_p, pv, w)
            cdf = tl.cumsum(w, axis=0) + running
            ok = (cdf > target) & (w > 0)
            first = tl.min(tl.where(ok, v, vocab), axis=0).to(tl.int64)
            found = tl.where((found < 0) & (first < vocab), first, found)
            last_pos = tl.maximum(last_pos, tl.max(tl.where(w > 0, v, -1), axis=0).to(tl.int64))
            running += tl.sum(w, axis=0)
        bonus = tl.where(found >= 0, found, tl.maximum(last_pos, 0))
        last_row = tl.load(ridx_ptr + base + last).to(tl.int64)
        tl.store(predicts_ptr + last_row, bonus)
        tl.store(out_ptr + r * slots + count, bonus)
        tl.store(num_ptr + r, count.to(tl.int32))
        tl.store(bonus_ptr + r, bonus)


def _triton_outputs(b: int, n: int, depth: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    predicts = torch.full((b * n,), -1, dtype=torch.int64, device=device)
    accept_index = torch.full((b, depth + 1), -1, dtype=torch.int64, device=device)
    num = torch.zeros(b, dtype=torch.int32, device=device)
    bonus = torch.zeros(b, dtype=torch.int64, device=device)
    out = torch.full((b, depth + 1), -1, dtype=torch.int64, device=device)
    return predicts, accept_index, num, bonus, out


def _result(parts: tuple[torch.Tensor, ...]) -> TreeVerifyResult:
    predicts, accept_index, num, bonus, out = parts
    return TreeVerifyResult(
        predicts=predicts, accept_index=accept_index, accept_token_num=num, bonus=bonus,
        output_tokens=out,
    )


def _block_v(vocab: int, block_v: int | None) -> int:
    if block_v is None:
        block_v = DEFAULT_BLOCK_V
    return max(16, min(triton.next_power_of_2(max(vocab, 1)), triton.next_power_of_2(block_v)))


def target_argmax_triton(target_logits: torch.Tensor, *, block_v: int | None = None) -> torch.Tensor:
    """Row argmax of `target_logits` [b, N, V] (ties to the lowest index), int64 [b, N]."""
    b, n, vocab = target_logits.shape
    logits = target_logits.contiguous()
    out = torch.empty(b, n, dtype=torch.int64, device=logits.device)
    if b * n > 0:
        _row_argmax_kernel[(b * n,)](logits, out, vocab, BLOCK_V=_block_v(vocab, block_v))
    return out


def verify_tree_greedy_triton(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    target_predict: torch.Tensor,
    *,
    depth: int,
) -> TreeVerifyResult:
    b, n = candidates.shape
    parts = _triton_outputs(b, n, depth, candidates.device)
    if b > 0:
        _tree_greedy_kernel[(b,)](
            candidates.contiguous(), retrieve_index.contiguous(), next_token.contiguous(),
            next_sibling.contiguous(), target_predict.contiguous(), *parts, depth, N=n,
        )
    return _result(parts)


def verify_tree_sampling_triton(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    coins: torch.Tensor,
    final_coins: torch.Tensor,
    *,
    depth: int,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    block_v: int | None = None,
) -> TreeVerifyResult:
    b, n, vocab = target_probs.shape
    parts = _triton_outputs(b, n, depth, candidates.device)
    p = target_probs.contiguous()
    q = draft_probs.contiguous() if draft_probs is not None else p
    if b > 0:
        _tree_sampling_kernel[(b,)](
            candidates.contiguous(), retrieve_index.contiguous(), next_token.contiguous(),
            next_sibling.contiguous(), p, q, coins.contiguous(), final_coins.contiguous(),
            *parts, vocab, depth, float(threshold_single), float(threshold_acc),
            N=n, HAS_Q=draft_probs is not None, CAP=max(triton.next_power_of_2(max(n - 1, 1)), 2),
            BLOCK_V=_block_v(vocab, block_v),
        )
    return _result(parts)


# ---------------------------------------------------------------------------------------------
# Public wrappers
# ---------------------------------------------------------------------------------------------


def verify_tree_greedy(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    *,
    depth: int,
    target_logits: torch.Tensor | None = None,
    target_predict: torch.Tensor | None = None,
    check_values: bool | None = None,
    block_v: int | None = None,
) -> TreeVerifyResult:
    """Greedy tree verification (see the module docstring).

    Give exactly one of `target_logits` [b, N, V] (any float dtype; argmax per node, ties to the
    lowest index) or `target_predict` [b, N] (the argmax already computed). `depth` = num_steps.
    """
    b, n = _check_tree_inputs(
        candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, depth
    )
    if (target_logits is None) == (target_predict is None):
        raise KernelInputError(
            problem("SR900", "give exactly one of target_logits and target_predict",
                    accepted="target_logits [b, N, V] or target_predict [b, N]",
                    fix="pass one of the two", field="target_logits")
        )
    vocab = None
    if target_logits is not None:
        check_shape("target_logits", target_logits, (b, n, None))
        check_dtype("target_logits", target_logits, FLOAT_DTYPES)
        vocab = target_logits.shape[2]
        if vocab < 1:
            raise KernelInputError(
                problem("SR900", "target_logits has an empty vocab", accepted="V >= 1",
                        fix="pass the logits over the whole vocab", field="target_logits")
            )
    else:
        check_shape("target_predict", target_predict, (b, n))
        check_dtype("target_predict", target_predict, INDEX_DTYPES)
    device = check_same_device(
        candidates=candidates, retrieve_index=retrieve_index,
        retrieve_next_token=retrieve_next_token, retrieve_next_sibling=retrieve_next_sibling,
        target_logits=target_logits, target_predict=target_predict,
    )
    if should_check_values(device, check_values):
        _check_tree_values(
            candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, vocab
        )
        if target_logits is not None and bool(torch.isnan(target_logits).any()):
            raise KernelInputError(
                problem("SR904", "target_logits holds NaN", accepted="finite or -inf logits",
                        fix="check the target forward", field="target_logits")
            )
    args = (candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling)
    if select_backend(candidates) == "triton":
        if target_predict is None:
            target_predict = target_argmax_triton(target_logits, block_v=block_v)
        return verify_tree_greedy_triton(*args, target_predict, depth=depth)
    if target_logits is not None and device.type == "cpu":
        return verify_tree_greedy_from_logits_torch(*args, target_logits, depth=depth)
    if target_logits is not None:
        target_predict = torch.argmax(target_logits, dim=-1)
    return verify_tree_greedy_torch(*args, target_predict, depth=depth)


def verify_tree_sampling(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    target_probs: torch.Tensor,
    *,
    depth: int,
    draft_probs: torch.Tensor | None = None,
    coins: torch.Tensor | None = None,
    final_coins: torch.Tensor | None = None,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    seed: int | None = None,
    offsets: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    block_v: int | None = None,
) -> TreeVerifyResult:
    """Tree speculative sampling (see the module docstring for both rules).

    `target_probs` [b, N, V] float; `draft_probs` None (target-only) or [b, N, V] (row i = q of
    node i's children; all-zero rows use the target-only rule). `coins` [b, N] and
    `final_coins` [b] float32 in [0, 1); missing ones come from
    `specreg.kernels.sampling.uniform_coins((b, N + 1), seed=seed, offsets=offsets)` (columns
    0..N-1 the node coins, column N the final coin), or `torch.rand` with `generator` when no seed.
    Thresholds in (0, 1] apply to the target-only rule; 1.0 keeps it lossless.
    """
    b, n = _check_tree_inputs(
        candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, depth
    )
    vocab = _check_tree_rows(b, n, target_probs=target_probs, draft_probs=draft_probs)
    if coins is not None:
        check_shape("coins", coins, (b, n))
        check_dtype("coins", coins, FLOAT_DTYPES)
    if final_coins is not None:
        check_shape("final_coins", final_coins, (b,))
        check_dtype("final_coins", final_coins, FLOAT_DTYPES)
    for name, value in (("threshold_single", threshold_single), ("threshold_acc", threshold_acc)):
        if not isinstance(value, (int, float)) or not 0.0 < float(value) <= 1.0:
            raise KernelInputError(
                problem("SR904", f"{name}={value!r} is outside (0, 1]", accepted="(0, 1]",
                        fix=f"pass {name}=1.0 for lossless sampling", field=name)
            )
    device = check_same_device(
        candidates=candidates, retrieve_index=retrieve_index,
        retrieve_next_token=retrieve_next_token, retrieve_next_sibling=retrieve_next_sibling,
        target_probs=target_probs, draft_probs=draft_probs, coins=coins, final_coins=final_coins,
    )
    if should_check_values(device, check_values):
        _check_tree_values(
            candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, vocab
        )
        check_probabilities("target_probs", target_probs)
        if draft_probs is not None:
            check_probabilities("draft_probs", draft_probs, allow_zero_rows=True)
        for name, tensor in (("coins", coins), ("final_coins", final_coins)):
            if tensor is not None and not bool(((tensor >= 0) & (tensor < 1)).all()):
                raise KernelInputError(
                    problem("SR904", f"{name} holds values outside [0, 1)", accepted="[0, 1)",
                            fix="draw coins with torch.rand or uniform_coins", field=name)
                )
    if coins is None or final_coins is None:
        from specreg.kernels.sampling import uniform_coins

        drawn = uniform_coins(
            (b, n + 1), device=device, seed=seed, offsets=offsets, generator=generator
        )
        coins = drawn[:, :n] if coins is None else coins
        final_coins = drawn[:, n] if final_coins is None else final_coins
    args = (candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling,
            target_probs, draft_probs, coins, final_coins)
    kwargs = dict(depth=depth, threshold_single=threshold_single, threshold_acc=threshold_acc)
    if select_backend(candidates) == "triton":
        return verify_tree_sampling_triton(*args, **kwargs, block_v=block_v)
    return verify_tree_sampling_torch(*args, **kwargs)


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
    probabilities: bool = False,
    offsets: torch.Tensor | None = None,
    generator: torch.Generator | None = None,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    check_values: bool | None = None,
    block_v: int | None = None,
) -> TreeVerifyResult:
    """Tree verification of a batch whose requests carry their own sampling parameters.

    `target` [b, N, V] and `draft` [b, N, V] (or None) are logits, or probabilities with
    `probabilities=True`. Temperature-0 requests get `verify_tree_greedy` on the target; the
    others get `verify_tree_sampling` on p = filter(target / T) and q = filter(draft / T)
    (`specreg.kernels.filtering`; the children must have been drawn from that filtered q).
    Filtered rows exist only for a chunk of requests at a time (`PARAMS_CHUNK_DIVISOR`).
    Coins: `request_coins(params, N + 1, offsets=...)` (columns 0..N-1 the node coins, column N
    the final draw), so a seeded request's tokens do not depend on the rest of the batch.
    `retrieve_index[r]` must address request r's own rows (r*N .. r*N + N - 1), as `build_tree`
    makes it. Bad parameters: SR910-SR915 with value checks, else `result.param_error`.
    """
    from specreg.kernels.chain_params.checks import check_scores

    require_params(params)
    links = (candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling)
    b, n = _check_tree_inputs(*links, depth)
    vocab = _check_tree_rows(b, n, target=target, draft=draft)
    device = check_same_device(
        candidates=candidates, retrieve_index=retrieve_index,
        retrieve_next_token=retrieve_next_token, retrieve_next_sibling=retrieve_next_sibling,
        target=target, draft=draft,
    )
    values = should_check_values(device, check_values)
    params.validate(b, vocab, device, values=values)
    if values:
        _check_tree_values(*links, vocab)
        for name, scores in (("target", target), ("draft", draft)):
            if scores is None:
                continue
            if probabilities:
                check_probabilities(name, scores, allow_zero_rows=name == "draft")
            else:
                check_scores(name, scores)
    drawn = request_coins(params, n + 1, offsets=offsets, generator=generator)
    triton_path = select_backend(candidates) == "triton"
    predict = (
        target_argmax_triton(target, block_v=block_v) if triton_path
        else torch.argmax(target, dim=-1)
    )
    verify_greedy = verify_tree_greedy_triton if triton_path else verify_tree_greedy_torch
    greedy = verify_greedy(*links, predict, depth=depth)
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
            links, target, draft, params, drawn, chunk_requests, depth=depth,
            probabilities=probabilities, triton_path=triton_path, block_v=block_v,
            thresholds=(threshold_single, threshold_acc),
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


def _sampled_chunk(
    links: tuple[torch.Tensor, ...],
    target: torch.Tensor,
    draft: torch.Tensor | None,
    params: SamplingParams,
    drawn: torch.Tensor,
    requests: torch.Tensor,
    *,
    depth: int,
    probabilities: bool,
    triton_path: bool,
    block_v: int | None,
    thresholds: tuple[float, float],
) -> TreeVerifyResult:
    """Tree sampling of `requests` on their filtered rows (local row numbering)."""
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
    filtered = [
        _filtered_tree_rows(scores, rows, row_params, probabilities, triton_path, block_v)
        .view(count, n, vocab) if scores is not None else None
        for scores in (target, draft)
    ]
    args = (candidates[requests], local_index, next_token[requests], next_sibling[requests],
            filtered[0], filtered[1], drawn[requests, :n], drawn[requests, n])
    kwargs = dict(depth=depth, threshold_single=thresholds[0], threshold_acc=thresholds[1])
    if triton_path:
        return verify_tree_sampling_triton(*args, **kwargs, block_v=block_v)
    return verify_tree_sampling_torch(*args, **kwargs)


def _filtered_tree_rows(
    scores: torch.Tensor,
    rows: torch.Tensor,
    row_params: SamplingParams,
    probabilities: bool,
    triton_path: bool,
    block_v: int | None,
) -> torch.Tensor:
    """Filtered float32 rows `scores.view(-1, V)[rows]` under per-row parameters."""
    flat = scores.reshape(-1, scores.shape[-1])
    p = row_params
    if triton_path:
        from specreg.kernels.filtering.triton_impl import row_stats_triton

        shift, threshold, norm = row_stats_triton(
            flat, rows, p.temperature, p.top_k, p.top_p, p.min_p, probabilities=probabilities,
            block_v=_block_v(flat.shape[-1], block_v),
        )
        stats = RowStats(shift=shift, threshold=threshold, norm=norm)
    else:
        stats = gathered_row_stats(flat, rows, p.temperature, p.top_k, p.top_p, p.min_p,
                                   probabilities=probabilities)
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
