"""`build_tree` in torch: the CPU path, vectorised over requests with bounded ancestor walks.

Notation: b = batch, K = topk, S = depth, N = num_verify_tokens. A tree node's *local index* is
0 for the root and 1 + i for the i-th kept draft.
"""

from __future__ import annotations

import torch

from specreg.kernels.tree_build.checks import first_invalid, invalid_tree
from specreg.kernels.tree_build.types import (
    TreeBuildInputs,
    TreeBuildResult,
    bitpacked_dtype,
)


def parent_local_torch(
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


def ancestors_torch(
    parent_local: torch.Tensor, depth: int
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
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


def tree_ok_torch(inputs: TreeBuildInputs) -> torch.Tensor:
    """ok [b, N]: each node reaches the root within `depth` steps through kept parents."""
    parent_local = parent_local_torch(inputs.parent_list, inputs.top_scores_index, inputs.topk)
    return ancestors_torch(parent_local, inputs.depth)[2]


def _pack_rows_torch(anc: torch.Tensor, n: int) -> torch.Tensor:
    weights = torch.ones(n, dtype=torch.int64, device=anc.device) << torch.arange(n, device=anc.device)
    words = (anc.to(torch.int64) * weights).sum(-1).flatten()
    dtype = bitpacked_dtype(n)
    if dtype != torch.uint8:
        bits = 16 if dtype == torch.int16 else 32
        words = torch.where(words >= 2 ** (bits - 1), words - 2**bits, words)
    return words.to(dtype)


def full_mask_starts(seq_lens: torch.Tensor, n: int) -> torch.Tensor:
    """Flat offset of each request's block in the full mask (int64 [b])."""
    seq = seq_lens.to(torch.int64)
    before = torch.cumsum(seq, 0) - seq
    ar = torch.arange(seq.shape[0], dtype=torch.int64, device=seq.device)
    return ar * (n * n) + before * n


def build_tree_torch(inputs: TreeBuildInputs) -> TreeBuildResult:
    """The verify tree of `inputs` (see `TreeBuildResult`). Raises SR210 before writing any
    output when a tree is invalid."""
    n, depth, mask_mode = inputs.num_verify_tokens, inputs.depth, inputs.mask_mode
    bonus_tokens, seq_lens = inputs.bonus_tokens, inputs.seq_lens
    batch = bonus_tokens.shape[0]
    device = bonus_tokens.device
    parent_local = parent_local_torch(inputs.parent_list, inputs.top_scores_index, inputs.topk)
    anc, node_depth, ok = ancestors_torch(parent_local, depth)
    if not bool(ok.all()):
        r, t = first_invalid(ok)
        raise invalid_tree(
            f"request {r}: tree node {t} (draft global id "
            f"{int(inputs.top_scores_index[r, t - 1])}) has no kept parent within depth {depth}"
        )
    first_child, next_sibling = tree_links_torch(parent_local)
    seq = seq_lens.to(torch.int64)
    positions = (seq.unsqueeze(1) + node_depth).flatten()
    retrieve_index = torch.arange(batch * n, dtype=torch.int64, device=device).view(batch, n)
    tokens = torch.cat(
        [bonus_tokens.to(torch.int64).unsqueeze(1), inputs.draft_tokens.to(torch.int64)], 1
    )
    if mask_mode == "qlen_only":
        mask = anc.flatten()
    elif mask_mode == "qlen_only_bitpacking":
        mask = _pack_rows_torch(anc, n)
    else:
        total_seq = inputs.total_seq()
        mask = torch.zeros(total_seq * n + batch * n * n, dtype=torch.bool, device=device)
        row_len = (seq + n).unsqueeze(1)
        row_start = full_mask_starts(seq, n).unsqueeze(1) + torch.arange(n, device=device) * row_len
        cols = row_start.unsqueeze(2) + seq.view(batch, 1, 1) + torch.arange(n, device=device)
        mask[cols.flatten()] = anc.flatten()
        if inputs.fill_prefix_mask and total_seq > 0:
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
