"""Greedy tree verification in Triton: one program per request walks its tree.

The target's argmax comes from the core argmax family (`row_argmax_triton`) or the caller.
`triton_outputs` / `triton_result` allocate and wrap the outputs of both verify kernels.
"""

from __future__ import annotations

import torch

from specreg.kernels.triton_shim import tl, triton
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult

if triton is not None:

    @triton.jit
    def walk_step(
        ridx_ptr, nt_ptr, ns_ptr, predicts_ptr, acc_ptr, out_ptr,
        base, out_base, last, node, cur, count, token, take, active,
    ):
        """One step of a tree walk (greedy and sampling kernels alike): when `take`, record the
        accepted `token` under its parent's row and move down to `node`'s first child;
        otherwise move right to `node`'s sibling (while `active`). Returns (last, cur, count)."""
        last_row = tl.load(ridx_ptr + base + last).to(tl.int64)
        tl.store(predicts_ptr + last_row, token, mask=take)
        tl.store(out_ptr + out_base + count, token, mask=take)
        node_row = tl.load(ridx_ptr + base + node).to(tl.int64)
        tl.store(acc_ptr + out_base + count + 1, node_row, mask=take)
        count += take.to(tl.int64)
        child = tl.load(nt_ptr + base + node).to(tl.int64)
        sibling = tl.load(ns_ptr + base + node).to(tl.int64)
        last = tl.where(take, node, last)
        cur = tl.where(take, child, tl.where(active, sibling, cur))
        return last, cur, count

    @triton.jit
    def write_bonus(
        ridx_ptr, predicts_ptr, out_ptr, num_ptr, bonus_ptr, base, r, out_base, last, count,
        bonus,
    ):
        """The end of a tree walk: the bonus token after the last accepted node, and the count."""
        last_row = tl.load(ridx_ptr + base + last).to(tl.int64)
        tl.store(predicts_ptr + last_row, bonus)
        tl.store(out_ptr + out_base + count, bonus)
        tl.store(num_ptr + r, count.to(tl.int32))
        tl.store(bonus_ptr + r, bonus)

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
            last, cur, count = walk_step(
                ridx_ptr, nt_ptr, ns_ptr, predicts_ptr, acc_ptr, out_ptr,
                base, r * slots, last, safe, cur, count, tok, hit, active,
            )
        bonus = tl.load(predict_ptr + base + last).to(tl.int64)
        write_bonus(
            ridx_ptr, predicts_ptr, out_ptr, num_ptr, bonus_ptr, base, r, r * slots, last, count,
            bonus,
        )


def triton_outputs(b: int, n: int, depth: int, device: torch.device) -> tuple[torch.Tensor, ...]:
    """(predicts, accept_index, accept_token_num, bonus, output_tokens), initialised."""
    predicts = torch.full((b * n,), -1, dtype=torch.int64, device=device)
    accept_index = torch.full((b, depth + 1), -1, dtype=torch.int64, device=device)
    num = torch.zeros(b, dtype=torch.int32, device=device)
    bonus = torch.zeros(b, dtype=torch.int64, device=device)
    out = torch.full((b, depth + 1), -1, dtype=torch.int64, device=device)
    return predicts, accept_index, num, bonus, out


def triton_result(parts: tuple[torch.Tensor, ...]) -> TreeVerifyResult:
    predicts, accept_index, num, bonus, out = parts
    return TreeVerifyResult(
        predicts=predicts, accept_index=accept_index, accept_token_num=num, bonus=bonus,
        output_tokens=out,
    )


def verify_tree_greedy_triton(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    target_predict: torch.Tensor,
    *,
    depth: int,
) -> TreeVerifyResult:
    """Greedy verification on the target's argmax `target_predict` [b, N]."""
    b, n = candidates.shape
    parts = triton_outputs(b, n, depth, candidates.device)
    if b > 0:
        _tree_greedy_kernel[(b,)](
            candidates.contiguous(), retrieve_index.contiguous(), next_token.contiguous(),
            next_sibling.contiguous(), target_predict.contiguous(), *parts, depth, N=n,
        )
    return triton_result(parts)
