"""EAGLE draft-tree kernels: select_top_k_tokens, organize_draft_results, build_tree.

Notation: b = batch, K = topk, S = num_steps (the tree depth), N = num_verify_tokens (root plus
N - 1 kept drafts). Draft token *global ids* number the drafted tokens of one request: level 0
holds ids 0..K-1, level j >= 1 holds ids K + K*K*(j-1) ... K + K*K*j - 1 (K children for each of
the K expanded nodes of level j - 1). A tree node's *local index* is 0 for the root and 1 + i for
the i-th kept draft.

`build_tree` has a torch implementation (`build_tree_torch`, CPU path and oracle) and a Triton one
(`build_tree_triton`, one program per request); the public `build_tree` validates and dispatches.
"""

from __future__ import annotations

from collections.abc import Sequence

import attrs
import torch

from specreg.backend import select_backend
from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    INDEX_DTYPES,
    check_dtype,
    check_index_range,
    check_same_device,
    check_shape,
    check_tensor,
    should_check_values,
)

try:
    import triton
    import triton.language as tl
except ImportError:  # pragma: no cover - triton is an optional extra
    triton = None

MASK_MODES = ("full", "qlen_only", "qlen_only_bitpacking")
MAX_BITPACKED_NODES = 32


def num_draft_ids(topk: int, depth: int) -> int:
    """How many tokens the draft loop proposes per request: K + (S - 1) * K**2."""
    return topk + (depth - 1) * topk * topk


def bitpacked_dtype(num_verify_tokens: int) -> torch.dtype:
    """Word type of one packed mask row: uint8 (N <= 8), int16 (<= 16), int32 (<= 32).

    Bit j of a node's word is set when the node attends tree node j (bit 0 = the root). int16 and
    int32 hold the same bit patterns as SGLang's uint16/uint32 words.
    """
    if num_verify_tokens <= 8:
        return torch.uint8
    if num_verify_tokens <= 16:
        return torch.int16
    return torch.int32


# ---------------------------------------------------------------------------------------------
# Draft loop helpers (torch only).
# ---------------------------------------------------------------------------------------------


def _check_select_inputs(
    i: int,
    topk_p: torch.Tensor,
    topk_index: torch.Tensor,
    hidden_states: torch.Tensor,
    scores: torch.Tensor | None,
    topk: int,
) -> None:
    if not isinstance(topk, int) or isinstance(topk, bool) or topk < 1:
        raise KernelInputError(
            problem("SR904", f"topk={topk!r} is not a positive integer", accepted="topk >= 1",
                    fix="pass the plan's topk", field="topk")
        )
    check_tensor("topk_p", topk_p)
    check_dtype("topk_p", topk_p, FLOAT_DTYPES)
    check_dtype("topk_index", topk_index, INDEX_DTYPES)
    check_tensor("hidden_states", hidden_states)
    check_shape("topk_p", topk_p, (None, topk))
    check_shape("topk_index", topk_index, tuple(topk_p.shape))
    if i > 0:
        if topk_p.shape[0] % topk:
            raise KernelInputError(
                problem(
                    "SR900",
                    f"step {i}: topk_p has {topk_p.shape[0]} rows, not a multiple of topk={topk}",
                    accepted="[b * topk, topk] after step 0",
                    fix="pass the draft model's top-k over every branch of the previous step",
                    field="topk_p",
                )
            )
        if scores is not None:
            check_shape("scores", scores, (topk_p.shape[0] // topk, topk))
            check_dtype("scores", scores, FLOAT_DTYPES)
    if hidden_states.dim() < 1 or hidden_states.shape[0] != topk_p.shape[0]:
        check_shape("hidden_states", hidden_states, (topk_p.shape[0], None))
    check_same_device(
        topk_p=topk_p, topk_index=topk_index, hidden_states=hidden_states, scores=scores
    )


def select_top_k_tokens(
    i: int,
    topk_p: torch.Tensor,
    topk_index: torch.Tensor,
    hidden_states: torch.Tensor,
    scores: torch.Tensor | None,
    topk: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor, tuple[torch.Tensor, torch.Tensor, torch.Tensor]]:
    """One EAGLE draft step: choose the K branches to expand next.

    Step 0: `topk_p`, `topk_index` are [b, K] (the draft-extend output), `hidden_states` [b, H].
    Step i > 0: they are [b*K, K] (K candidates for each of the K branches), `hidden_states`
    [b*K, H] and `scores` [b, K] the cumulative path probabilities of the current branches.

    Returns `(input_ids [b*K], hidden_states [b*K, H], scores [b, K], tree_info)` where
    `tree_info = (step_scores, step_tokens, parents)`: step 0 gives `([b, 1, K], [b, K],
    [b, K+1] = -1, 0..K-1)`; step i gives `([b, K, K] cumulative scores, [b, K*K] tokens,
    [b, K] global ids of the chosen branches)`.
    """
    _check_select_inputs(i, topk_p, topk_index, hidden_states, scores, topk)
    if i == 0:
        batch = topk_p.shape[0]
        input_ids = topk_index.flatten()
        hidden = hidden_states.repeat_interleave(topk, dim=0)
        parents = torch.arange(-1, topk, dtype=torch.int64, device=topk_p.device)
        tree_info = (topk_p.unsqueeze(1), topk_index, parents.unsqueeze(0).expand(batch, topk + 1))
        return input_ids, hidden, topk_p, tree_info
    if scores is None:
        raise KernelInputError(
            problem(
                "SR213",
                f"select_top_k_tokens step {i} needs the scores returned by step {i - 1}",
                accepted="scores [b, K] for i > 0",
                fix="pass the scores the previous step returned",
                field="scores",
            )
        )
    batch = scores.shape[0]
    expand = scores.unsqueeze(2) * topk_p.view(batch, topk, topk)
    chosen_p, chosen = torch.topk(expand.flatten(1), topk, dim=-1)
    step_tokens = topk_index.view(batch, topk * topk)
    input_ids = torch.gather(step_tokens, 1, chosen).flatten()
    rows = chosen // topk + torch.arange(batch, device=chosen.device).unsqueeze(1) * topk
    hidden = hidden_states[rows.flatten()]
    parents = chosen + (topk * topk * (i - 1) + topk)
    return input_ids, hidden, chosen_p, (expand, step_tokens, parents)


def organize_draft_results(
    score_list: Sequence[torch.Tensor],
    token_list: Sequence[torch.Tensor],
    parents_list: Sequence[torch.Tensor],
    num_draft_tokens: int,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Keep the N - 1 best drafts of the tree. Returns `(parent_list, top_scores_index, draft_tokens)`.

    `parent_list` [b, K*(S-1)+1] int64 (empty [b, 0] for one step), `top_scores_index` [b, N-1]
    int64 global ids sorted ascending (so parents come before children), `draft_tokens` [b, N-1].
    """
    if not score_list or len(score_list) != len(token_list) or len(token_list) != len(parents_list):
        raise KernelInputError(
            problem(
                "SR213",
                f"score_list, token_list and parents_list have {len(score_list)}, "
                f"{len(token_list)} and {len(parents_list)} entries",
                accepted="one entry per draft step in each list, at least one step",
                fix="pass the three lists the draft loop built with select_top_k_tokens",
                field="score_list",
            )
        )
    first = check_tensor("score_list", score_list[0])
    batch = first.shape[0] if first.dim() else -1  # a 0-d entry fails the shape check
    for name, items, dtypes, rank in (
        ("score_list", score_list, FLOAT_DTYPES, None),
        ("token_list", token_list, INDEX_DTYPES, 2),
        ("parents_list", parents_list, INDEX_DTYPES, 2),
    ):
        for item in items:
            check_shape(name, item, (batch, *[None] * ((rank or max(item.dim(), 2)) - 1)))
            check_dtype(name, item, dtypes)
            check_same_device(**{"score_list[0]": first, name: item})
    scores = torch.cat([s.flatten(1) for s in score_list], dim=1)
    tokens = torch.cat(list(token_list), dim=1)
    if scores.shape != tokens.shape or not 1 <= num_draft_tokens - 1 <= scores.shape[1]:
        raise KernelInputError(
            problem(
                "SR213",
                f"{scores.shape[1]} drafted scores, {tokens.shape[1]} drafted tokens, asked to "
                f"keep num_draft_tokens - 1 = {num_draft_tokens - 1}",
                accepted="as many scores as tokens, and 1 <= num_draft_tokens - 1 <= that count",
                fix="check num_draft_tokens against the tree size",
                field="num_draft_tokens",
            )
        )
    top_scores_index = torch.topk(scores, num_draft_tokens - 1, dim=-1).indices
    top_scores_index = torch.sort(top_scores_index, dim=-1).values
    draft_tokens = torch.gather(tokens, 1, top_scores_index)
    if len(parents_list) > 1:
        parent_list = torch.cat(list(parents_list[:-1]), dim=1).to(torch.int64)
    else:
        parent_list = torch.empty(scores.shape[0], 0, dtype=torch.int64, device=scores.device)
    return parent_list, top_scores_index, draft_tokens


# ---------------------------------------------------------------------------------------------
# build_tree
# ---------------------------------------------------------------------------------------------


@attrs.frozen(kw_only=True)
class TreeBuildResult:
    """What `build_tree` produces for b requests of N tree nodes.

    - `tree_mask`: `full` bool [seq_lens_sum*N + b*N*N] (request r's block starts at
      `N*N*r + N*sum(seq_lens[:r])`, each of its N rows has seq_lens[r] prefix columns then N tree
      columns); `qlen_only` bool [b*N*N]; `qlen_only_bitpacking` [b*N] words (`bitpacked_dtype`).
    - `positions` int64 [b*N]: seq_len + depth (root depth 0).
    - `retrieve_index` int64 [b, N] = r*N + i; `retrieve_next_token` int64 [b, N] first child
      (local index) or -1; `retrieve_next_sibling` int64 [b, N] next sibling (children listed in
      ascending local index) or -1.
    - `draft_tokens` int64 [b*N]: the root (bonus token) then the kept drafts of each request.
    - `invalid` int32 [b]: nonzero for requests whose tree is invalid (GPU path; the CPU path
      raises SR210 instead, so it is all zeros there).
    """

    tree_mask: torch.Tensor
    positions: torch.Tensor
    retrieve_index: torch.Tensor
    retrieve_next_token: torch.Tensor
    retrieve_next_sibling: torch.Tensor
    draft_tokens: torch.Tensor
    invalid: torch.Tensor
    mask_mode: str
    num_verify_tokens: int


def _invalid_tree(message: str) -> KernelInputError:
    return KernelInputError(
        problem(
            "SR210",
            message,
            accepted="every kept draft's parent kept too, each draft within `depth` of the root",
            fix="check the draft scores for NaN and pass the parent_list of the same step",
            field="top_scores_index",
        )
    )


def _validate_build_tree(
    bonus_tokens: torch.Tensor,
    parent_list: torch.Tensor,
    top_scores_index: torch.Tensor,
    draft_tokens: torch.Tensor,
    seq_lens: torch.Tensor,
    topk: int,
    depth: int,
    num_verify_tokens: int,
    mask_mode: str,
) -> None:
    if mask_mode not in MASK_MODES:
        raise KernelInputError(
            problem(
                "SR211",
                f"tree mask mode {mask_mode!r} is not known",
                accepted=", ".join(MASK_MODES),
                fix="pass one of the accepted modes",
                field="mask_mode",
            )
        )
    for name, value, low in (("topk", topk, 1), ("depth", depth, 1), ("num_verify_tokens", num_verify_tokens, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise KernelInputError(
                problem(
                    "SR904",
                    f"{name} must be an int >= {low}, got {value!r}",
                    accepted=f"an int >= {low}",
                    fix=f"pass {name} as a positive int",
                    field=name,
                )
            )
    if mask_mode == "qlen_only_bitpacking" and num_verify_tokens > MAX_BITPACKED_NODES:
        raise KernelInputError(
            problem(
                "SR212",
                f"num_verify_tokens={num_verify_tokens} does not fit a 32-bit packed mask row",
                accepted=f"num_verify_tokens <= {MAX_BITPACKED_NODES} for qlen_only_bitpacking",
                fix="use mask_mode='qlen_only' or 'full'",
                field="mask_mode",
            )
        )
    check_shape("bonus_tokens", bonus_tokens, (None,))
    batch = bonus_tokens.shape[0]
    n = num_verify_tokens
    parents_width = topk * (depth - 1) + 1 if depth > 1 else 0
    check_shape("parent_list", parent_list, (batch, parents_width))
    check_shape("top_scores_index", top_scores_index, (batch, n - 1))
    check_shape("draft_tokens", draft_tokens, (batch, n - 1))
    check_shape("seq_lens", seq_lens, (batch,))
    for name, tensor in (
        ("bonus_tokens", bonus_tokens),
        ("parent_list", parent_list),
        ("top_scores_index", top_scores_index),
        ("draft_tokens", draft_tokens),
        ("seq_lens", seq_lens),
    ):
        check_dtype(name, tensor, INDEX_DTYPES)
    check_same_device(
        bonus_tokens=bonus_tokens,
        parent_list=parent_list,
        top_scores_index=top_scores_index,
        draft_tokens=draft_tokens,
        seq_lens=seq_lens,
    )


def _check_build_tree_values(
    parent_list: torch.Tensor,
    top_scores_index: torch.Tensor,
    seq_lens: torch.Tensor,
    topk: int,
    depth: int,
) -> None:
    ids = num_draft_ids(topk, depth)
    check_index_range("top_scores_index", top_scores_index, 0, ids)
    check_index_range("parent_list", parent_list, -1, ids)
    check_index_range("seq_lens", seq_lens, 0, 2**62)


def _parent_local_torch(
    parent_list: torch.Tensor, top_scores_index: torch.Tensor, topk: int
) -> torch.Tensor:
    """Local index of each node's parent [b, N]: -1 for the root, -2 when it cannot be found.

    Only the request's own row of `parent_list` and `top_scores_index` is searched.
    """
    sel = top_scores_index.to(torch.int64)
    batch, kept = sel.shape
    slot = sel // topk
    width = parent_list.shape[1]
    in_range = (slot >= 0) & (slot < width)
    if width > 0:
        pid = torch.gather(parent_list.to(torch.int64), 1, slot.clamp(0, width - 1))
    else:
        pid = torch.full_like(sel, -1)
    eq = sel.unsqueeze(1) == pid.unsqueeze(2)  # [b, child, candidate parent]
    found = eq.any(-1)
    pos = torch.argmax(eq.to(torch.int8), dim=-1) + 1
    parent = torch.where(slot == 0, torch.zeros_like(sel), pos)
    parent = torch.where((slot == 0) | (in_range & found), parent, torch.full_like(sel, -2))
    root = torch.full((batch, 1), -1, dtype=torch.int64, device=sel.device)
    return torch.cat([root, parent], dim=1)


def tree_links_torch(parent_local: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """First child and next sibling ([b, N] int64, -1 for none) from parent local indices."""
    n = parent_local.shape[1]
    idx = torch.arange(n, device=parent_local.device)
    none = torch.full_like(parent_local, n)
    is_child = parent_local.unsqueeze(1) == idx.view(1, n, 1)  # [b, node i, node j]: j child of i
    first_child = torch.where(is_child, idx.view(1, 1, n), none.unsqueeze(1)).amin(-1)
    same = (parent_local.unsqueeze(1) == parent_local.unsqueeze(2)) & (parent_local.unsqueeze(2) >= 0)
    later = idx.view(1, 1, n) > idx.view(1, n, 1)
    next_sibling = torch.where(same & later, idx.view(1, 1, n), none.unsqueeze(1)).amin(-1)
    minus = torch.full_like(parent_local, -1)
    return (
        torch.where(first_child < n, first_child, minus),
        torch.where(next_sibling < n, next_sibling, minus),
    )


def _ancestors_torch(parent_local: torch.Tensor, depth: int) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(ancestor-or-self matrix [b, N, N] bool, node depth [b, N], ok [b, N]) by a walk of at
    most `depth` steps per node."""
    batch, n = parent_local.shape
    idx = torch.arange(n, device=parent_local.device)
    anc = torch.zeros(batch, n, n, dtype=torch.bool, device=parent_local.device)
    anc[:, :, 0] = True
    cur = idx.expand(batch, n).clone()
    node_depth = torch.zeros(batch, n, dtype=torch.int64, device=parent_local.device)
    broken = torch.zeros(batch, n, dtype=torch.bool, device=parent_local.device)
    for _ in range(depth):
        active = (cur > 0) & ~broken
        anc |= (idx.view(1, 1, n) == cur.unsqueeze(2)) & active.unsqueeze(2)
        node_depth += active.to(torch.int64)
        nxt = torch.gather(parent_local, 1, cur.clamp(0, n - 1))
        broken |= active & (nxt < 0)
        cur = torch.where(active, nxt.clamp_min(0), cur)
    ok = (cur == 0) & ~broken
    return anc, node_depth, ok


def _pack_rows_torch(anc: torch.Tensor, n: int) -> torch.Tensor:
    weights = torch.ones(n, dtype=torch.int64, device=anc.device) << torch.arange(n, device=anc.device)
    words = (anc.to(torch.int64) * weights).sum(-1).flatten()
    dtype = bitpacked_dtype(n)
    if dtype != torch.uint8:
        bits = 16 if dtype == torch.int16 else 32
        words = torch.where(words >= 2 ** (bits - 1), words - 2**bits, words)
    return words.to(dtype)


def _full_mask_starts(seq_lens: torch.Tensor, n: int) -> torch.Tensor:
    """Flat offset of each request's block in the full mask (int64 [b])."""
    seq = seq_lens.to(torch.int64)
    before = torch.cumsum(seq, 0) - seq
    ar = torch.arange(seq.shape[0], dtype=torch.int64, device=seq.device)
    return ar * (n * n) + before * n


def build_tree_torch(
    bonus_tokens: torch.Tensor,
    parent_list: torch.Tensor,
    top_scores_index: torch.Tensor,
    draft_tokens: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    topk: int,
    depth: int,
    num_verify_tokens: int,
    mask_mode: str = "full",
    seq_lens_sum: int | None = None,
    fill_prefix_mask: bool = True,
) -> TreeBuildResult:
    """Torch implementation (CPU path and oracle). Raises SR210 before writing any output."""
    n = num_verify_tokens
    batch = bonus_tokens.shape[0]
    device = bonus_tokens.device
    parent_local = _parent_local_torch(parent_list, top_scores_index, topk)
    anc, node_depth, ok = _ancestors_torch(parent_local, depth)
    if not bool(ok.all()):
        r, t = (int(v) for v in (~ok).nonzero()[0])
        raise _invalid_tree(
            f"request {r}: tree node {t} (draft global id {int(top_scores_index[r, t - 1])}) "
            f"has no kept parent within depth {depth}"
        )
    first_child, next_sibling = tree_links_torch(parent_local)
    seq = seq_lens.to(torch.int64)
    positions = (seq.unsqueeze(1) + node_depth).flatten()
    retrieve_index = torch.arange(batch * n, dtype=torch.int64, device=device).view(batch, n)
    tokens = torch.cat([bonus_tokens.to(torch.int64).unsqueeze(1), draft_tokens.to(torch.int64)], 1)
    if mask_mode == "qlen_only":
        mask = anc.flatten()
    elif mask_mode == "qlen_only_bitpacking":
        mask = _pack_rows_torch(anc, n)
    else:
        total_seq = int(seq.sum()) if seq_lens_sum is None else int(seq_lens_sum)
        mask = torch.zeros(total_seq * n + batch * n * n, dtype=torch.bool, device=device)
        row_len = (seq + n).unsqueeze(1)
        row_start = _full_mask_starts(seq, n).unsqueeze(1) + torch.arange(n, device=device) * row_len
        cols = row_start.unsqueeze(2) + seq.view(batch, 1, 1) + torch.arange(n, device=device)
        mask[cols.flatten()] = anc.flatten()
        if fill_prefix_mask and total_seq > 0:
            lengths = seq.repeat_interleave(n)
            starts = row_start.flatten()
            within = torch.arange(int(lengths.sum()), device=device) - torch.repeat_interleave(
                torch.cumsum(lengths, 0) - lengths, lengths
            )
            mask[torch.repeat_interleave(starts, lengths) + within] = True
    return TreeBuildResult(
        tree_mask=mask,
        positions=positions,
        retrieve_index=retrieve_index,
        retrieve_next_token=first_child,
        retrieve_next_sibling=next_sibling,
        draft_tokens=tokens.flatten(),
        invalid=torch.zeros(batch, dtype=torch.int32, device=device),
        mask_mode=mask_mode,
        num_verify_tokens=n,
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


def build_tree_triton(
    bonus_tokens: torch.Tensor,
    parent_list: torch.Tensor,
    top_scores_index: torch.Tensor,
    draft_tokens: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    topk: int,
    depth: int,
    num_verify_tokens: int,
    mask_mode: str = "full",
    seq_lens_sum: int | None = None,
    fill_prefix_mask: bool = True,
) -> TreeBuildResult:
    """Triton implementation: one program per request, no host synchronisation when
    `seq_lens_sum` is given (needed for the `full` mask size). Invalid trees set `invalid`."""
    n = num_verify_tokens
    batch = bonus_tokens.shape[0]
    device = bonus_tokens.device
    seq = seq_lens.to(torch.int64)
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
        total_seq = int(seq.sum()) if seq_lens_sum is None else int(seq_lens_sum)
        mask = torch.zeros(total_seq * n + batch * n * n, dtype=torch.bool, device=device)
        mask_arg, mode = mask.view(torch.int8), 0
        starts = _full_mask_starts(seq, n)
    if batch > 0:
        block_n = max(triton.next_power_of_2(n), 2)
        _build_tree_kernel[(batch,)](
            bonus_tokens,
            parent_list,
            top_scores_index,
            draft_tokens,
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
            topk,
            depth,
            N=n,
            MODE=mode,
            FILL_PREFIX=bool(fill_prefix_mask),
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


def build_tree(
    bonus_tokens: torch.Tensor,
    parent_list: torch.Tensor,
    top_scores_index: torch.Tensor,
    draft_tokens: torch.Tensor,
    seq_lens: torch.Tensor,
    *,
    topk: int,
    depth: int,
    num_verify_tokens: int,
    mask_mode: str = "full",
    seq_lens_sum: int | None = None,
    fill_prefix_mask: bool = True,
    check_values: bool | None = None,
) -> TreeBuildResult:
    """Build the verify tree of b requests (see `TreeBuildResult` for the outputs).

    Inputs: `bonus_tokens` [b] (the root of each tree), `parent_list` [b, K*(S-1)+1] ([b, 0] for
    depth 1), `top_scores_index` [b, N-1] and `draft_tokens` [b, N-1] from
    `organize_draft_results`, `seq_lens` [b] (prefix lengths without drafts); all int32/int64 on
    one device. `depth` = S bounds every ancestor walk. Shapes, dtypes and devices are checked
    always; index ranges and tree validity (SR903, SR210) on CPU, or on GPU with
    `check_values=True` (which synchronises). Pass `seq_lens_sum` with `mask_mode='full'` on GPU
    to avoid a synchronisation for the mask size.
    """
    _validate_build_tree(
        bonus_tokens, parent_list, top_scores_index, draft_tokens, seq_lens,
        topk, depth, num_verify_tokens, mask_mode,
    )
    args = (bonus_tokens, parent_list, top_scores_index, draft_tokens, seq_lens)
    kwargs = dict(
        topk=topk, depth=depth, num_verify_tokens=num_verify_tokens, mask_mode=mask_mode,
        seq_lens_sum=seq_lens_sum, fill_prefix_mask=fill_prefix_mask,
    )
    checking = should_check_values(bonus_tokens.device, check_values)
    if checking:
        _check_build_tree_values(parent_list, top_scores_index, seq_lens, topk, depth)
    if select_backend(*args) == "triton":
        if checking:
            parent_local = _parent_local_torch(parent_list, top_scores_index, topk)
            _, _, ok = _ancestors_torch(parent_local, depth)
            if not bool(ok.all()):
                r, t = (int(v) for v in (~ok).nonzero()[0])
                raise _invalid_tree(
                    f"request {r}: tree node {t} has no kept parent within depth {depth}"
                )
        return build_tree_triton(*args, **kwargs)
    return build_tree_torch(*args, **kwargs)


__all__ = [
    "MASK_MODES",
    "TreeBuildResult",
    "bitpacked_dtype",
    "build_tree",
    "build_tree_torch",
    "build_tree_triton",
    "num_draft_ids",
    "organize_draft_results",
    "select_top_k_tokens",
    "tree_links_torch",
]
