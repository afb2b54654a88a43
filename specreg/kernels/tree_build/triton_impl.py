"""`build_tree` in Triton: one program per request, the walk and the links in registers.

No host synchronisation when `seq_lens_sum` is given (the `full` mask's size); an invalid tree
sets the request's `invalid` entry instead of raising, and nothing is written outside its row.
"""

from __future__ import annotations

import torch

from specreg.kernels.triton_shim import tl, triton
from specreg.kernels.tree_build.torch_impl import full_mask_starts
from specreg.kernels.tree_build.types import (
    TreeBuildInputs,
    TreeBuildResult,
    bitpacked_dtype,
)

if triton is not None:

    @triton.jit
    def _build_tree_kernel(
        bonus_ptr,
        parent_ptr,
        sel_ptr,
        draft_ptr,
        seq_lens_ptr,
        mask_start_ptr,
        mask_ptr,
        positions_ptr,
        ridx_ptr,
        rnext_ptr,
        rsib_ptr,
        tokens_ptr,
        invalid_ptr,
        num_parents,
        topk,
        depth,
        N: tl.constexpr,
        MODE: tl.constexpr,  # 0 full, 1 qlen_only, 2 bitpacking
        FILL_PREFIX: tl.constexpr,
        BLOCK_N: tl.constexpr,
        BLOCK_C: tl.constexpr,
    ):
        r = tl.program_id(0).to(tl.int64)
        t = tl.arange(0, BLOCK_N)
        col = tl.arange(0, BLOCK_N)
        valid = t < N
        is_draft = (t >= 1) & valid
        sel = tl.load(sel_ptr + r * (N - 1) + (t - 1), mask=is_draft, other=-1).to(tl.int64)
        slot = tl.where(sel >= 0, sel // topk, -1)
        slot_ok = is_draft & (slot > 0) & (slot < num_parents)
        pid = tl.load(parent_ptr + r * num_parents + slot, mask=slot_ok, other=-3).to(tl.int64)
        # Search the parent's global id among this request's kept drafts only.
        eq = (sel[None, :] == pid[:, None]) & is_draft[None, :] & slot_ok[:, None]
        pos = tl.min(tl.where(eq, col[None, :], BLOCK_N), axis=1)
        parent = tl.where(slot == 0, 0, tl.where(slot_ok & (pos < N), pos, -2))
        parent = tl.where(is_draft, parent, -1)

        # Bounded ancestor walk: at most `depth` steps, parent lookups inside the row's registers.
        anc = (col[None, :] == 0) & valid[:, None]
        cur = tl.where(valid, t, 0)
        node_depth = tl.zeros([BLOCK_N], dtype=tl.int64)
        broken = t < 0
        for _ in range(depth):
            active = (cur > 0) & (~broken)
            anc = anc | ((col[None, :] == cur[:, None]) & active[:, None])
            node_depth += active.to(tl.int64)
            nxt = tl.sum(tl.where(col[None, :] == cur[:, None], parent[None, :], 0), axis=1)
            broken = broken | (active & (nxt < 0))
            cur = tl.where(active, tl.maximum(nxt, 0), cur)
        bad = valid & ((cur != 0) | broken)
        tl.store(invalid_ptr + r, tl.max(bad.to(tl.int32), axis=0))

        seq_len = tl.load(seq_lens_ptr + r).to(tl.int64)
        base = r * N
        tl.store(positions_ptr + base + t, seq_len + node_depth, mask=valid)
        tl.store(ridx_ptr + base + t, base + t, mask=valid)
        bonus = tl.load(bonus_ptr + r).to(tl.int64)
        drafts = tl.load(draft_ptr + r * (N - 1) + (t - 1), mask=is_draft, other=0).to(tl.int64)
        tl.store(tokens_ptr + base + t, tl.where(t == 0, bonus, drafts), mask=valid)

        # Linked lists: first child and next sibling, children in ascending local order.
        child = (parent[None, :] == t[:, None]) & valid[None, :]
        first = tl.min(tl.where(child, col[None, :], BLOCK_N), axis=1)
        tl.store(rnext_ptr + base + t, tl.where(first < N, first, -1), mask=valid)
        sib = (parent[None, :] == parent[:, None]) & (parent[:, None] >= 0) & (col[None, :] > t[:, None])
        sib = sib & valid[None, :]
        nxt_sib = tl.min(tl.where(sib, col[None, :], BLOCK_N), axis=1)
        tl.store(rsib_ptr + base + t, tl.where(nxt_sib < N, nxt_sib, -1), mask=valid)

        tile_mask = valid[:, None] & (col[None, :] < N)
        if MODE == 1:
            offs = r * N * N + t[:, None] * N + col[None, :]
            tl.store(mask_ptr + offs, anc.to(tl.int8), mask=tile_mask)
        elif MODE == 2:
            bits = tl.where(anc & tile_mask, tl.full([BLOCK_N, BLOCK_N], 1, tl.int64) << col[None, :].to(tl.int64), 0)
            word = tl.sum(bits, axis=1)
            if N > 16:
                word = tl.where(word >= 2147483648, word - 4294967296, word)
            elif N > 8:
                word = tl.where(word >= 32768, word - 65536, word)
            tl.store(mask_ptr + base + t, word.to(mask_ptr.dtype.element_ty), mask=valid)
        else:
            start = tl.load(mask_start_ptr + r)
            row_len = seq_len + N
            row = start + t.to(tl.int64) * row_len
            offs = row[:, None] + seq_len + col[None, :]
            tl.store(mask_ptr + offs, anc.to(tl.int8), mask=tile_mask)
            if FILL_PREFIX:
                cc = tl.arange(0, BLOCK_C)
                for c0 in range(0, seq_len, BLOCK_C):
                    c = c0 + cc
                    ones = tl.full([BLOCK_N, BLOCK_C], 1, tl.int8)
                    tl.store(mask_ptr + row[:, None] + c[None, :], ones, mask=valid[:, None] & (c[None, :] < seq_len))



def build_tree_triton(inputs: TreeBuildInputs) -> TreeBuildResult:
    """The verify tree of `inputs` (see `TreeBuildResult`); invalid trees set `invalid`."""
    n, mask_mode = inputs.num_verify_tokens, inputs.mask_mode
    bonus_tokens, parent_list = inputs.bonus_tokens, inputs.parent_list
    batch = bonus_tokens.shape[0]
    device = bonus_tokens.device
    seq = inputs.seq_lens.to(torch.int64)
    positions = torch.empty(batch * n, dtype=torch.int64, device=device)
    links = torch.empty(3, batch, n, dtype=torch.int64, device=device)
    tokens = torch.empty(batch * n, dtype=torch.int64, device=device)
    invalid = torch.zeros(batch, dtype=torch.int32, device=device)
    starts = positions  # placeholder pointer for the modes without prefix columns
    if mask_mode == "qlen_only":
        mask = torch.zeros(batch * n * n, dtype=torch.bool, device=device)
        mask_arg, mode = mask.view(torch.int8), 1
    elif mask_mode == "qlen_only_bitpacking":
        mask = torch.zeros(batch * n, dtype=bitpacked_dtype(n), device=device)
        mask_arg, mode = mask, 2
    else:
        mask = torch.zeros(inputs.total_seq() * n + batch * n * n, dtype=torch.bool, device=device)
        mask_arg, mode = mask.view(torch.int8), 0
        starts = full_mask_starts(seq, n)
    if batch > 0:
        block_n = max(triton.next_power_of_2(n), 2)
        _build_tree_kernel[(batch,)](
            bonus_tokens,
            parent_list,
            inputs.top_scores_index,
            inputs.draft_tokens,
            seq,
            starts,
            mask_arg,
            positions,
            links[0],
            links[1],
            links[2],
            tokens,
            invalid,
            parent_list.shape[1],
            inputs.topk,
            inputs.depth,
            N=n,
            MODE=mode,
            FILL_PREFIX=bool(inputs.fill_prefix_mask),
            BLOCK_N=block_n,
            BLOCK_C=128,
        )
    return TreeBuildResult(
        tree_mask=mask,
        positions=positions,
        retrieve_index=links[0],
        retrieve_next_token=links[1],
        retrieve_next_sibling=links[2],
        draft_tokens=tokens,
        invalid=invalid,
        mask_mode=mask_mode,
        num_verify_tokens=n,
    )
