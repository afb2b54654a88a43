"""Greedy tree verification in torch: the walk vectorised over requests (the CPU path).

`verify_tree_greedy_torch` walks on the target's argmax of every node; the CPU-tuned
`verify_tree_greedy_from_logits_torch` takes the argmax only of the rows the walk reaches
(same result). `assemble_result` turns an accepted path into a `TreeVerifyResult` for both
verification rules.
"""

from __future__ import annotations

import torch

from specreg.kernels.argmax import row_argmax
from specreg.kernels.chain.checks import check_reached_nan
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult


def assemble_result(
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
    return assemble_result(candidates, retrieve_index, path, count, bonus)


def verify_tree_greedy_from_logits_torch(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    target_logits: torch.Tensor,
    *,
    depth: int,
    check_reads: bool = False,
) -> TreeVerifyResult:
    """`verify_tree_greedy_torch` of the logits' argmax, taking the argmax only of the rows the
    walk reaches: level by level, the row of each still-descending request's last accepted node
    (CPU: the argmax of every node costs a read of all N rows; the walk needs depth + 1 at most).
    `check_reads` (the CPU default): SR904 for a NaN in a row the walk reaches (a row's argmax
    is its first NaN, so one value per row is read)."""
    b, n, vocab = target_logits.shape
    cand = candidates.to(torch.int64)
    nt, ns = next_token.to(torch.int64), next_sibling.to(torch.int64)
    device = target_logits.device
    path = torch.full((b, depth + 1), -1, dtype=torch.int64, device=device)
    path[:, 0] = 0
    count = torch.zeros(b, dtype=torch.int64, device=device)
    last = torch.zeros(b, dtype=torch.int64, device=device)
    bonus = torch.empty(b, dtype=torch.int64, device=device)
    flat = target_logits.detach().reshape(b * n, vocab)  # a view; values only (no autograd)
    gathered = None  # reused across levels: a fresh block per level costs page faults
    active = torch.arange(b, device=device)
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
        if check_reads:
            check_reached_nan("target_logits", rows.gather(1, predict[:, None]).squeeze(1),
                              active, node)
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
    return assemble_result(candidates, retrieve_index, path, count, bonus)
