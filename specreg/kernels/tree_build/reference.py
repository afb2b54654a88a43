"""The plain per-request rule of `build_tree` (test oracle): Python loops over requests and nodes.

Per request: each kept draft's parent is found from its global id (slot = id // K; slot 0 is the
root, else the kept draft whose id is `parent_list[slot]`); each node walks up at most `depth`
steps, marking the nodes it passes (its ancestors and itself, plus the root); a node that does
not reach the root makes the request invalid (flagged in `invalid`, every other output written
the same way). Children are linked in ascending local index.
"""

from __future__ import annotations

import torch

from specreg.kernels.tree_build.types import (
    TreeBuildInputs,
    TreeBuildResult,
    bitpacked_dtype,
)

NOT_FOUND = -2


def _parents(sel: list[int], parent_ids: list[int], topk: int) -> list[int]:
    """Local parent of each node: -1 for the root, NOT_FOUND when it is not kept."""
    parents = [-1]
    for global_id in sel:
        slot = global_id // topk if global_id >= 0 else -1
        if slot == 0:
            parents.append(0)
        elif 0 < slot < len(parent_ids) and parent_ids[slot] in sel:
            parents.append(1 + sel.index(parent_ids[slot]))
        else:
            parents.append(NOT_FOUND)
    return parents


def _walk(parents: list[int], node: int, depth: int) -> tuple[list[int], int, bool]:
    """(nodes marked, depth reached, reached the root) for the walk up from `node`."""
    marked, steps, cur = [0], 0, node
    for _ in range(depth):
        if cur == 0:
            break
        marked.append(cur)
        steps += 1
        if parents[cur] < 0:
            return marked, steps, False
        cur = parents[cur]
    return marked, steps, cur == 0


def _signed(word: int, dtype: torch.dtype) -> int:
    bits = {torch.int16: 16, torch.int32: 32}.get(dtype)
    return word - (1 << bits) if bits and word >= 1 << (bits - 1) else word


def build_tree_reference(inputs: TreeBuildInputs) -> TreeBuildResult:
    """Same outputs as `build_tree_triton` (and `build_tree_torch` on valid trees)."""
    n, topk, depth = inputs.num_verify_tokens, inputs.topk, inputs.depth
    batch = inputs.bonus_tokens.shape[0]
    seq_lens = [int(s) for s in inputs.seq_lens.tolist()]
    total_seq = inputs.total_seq()
    full = [False] * (total_seq * n + batch * n * n)
    qlen, words, positions, first, sibling, tokens, invalid = [], [], [], [], [], [], []
    dtype = bitpacked_dtype(n)
    start = 0
    for r in range(batch):
        sel = [int(v) for v in inputs.top_scores_index[r].tolist()]
        parents = _parents(sel, [int(v) for v in inputs.parent_list[r].tolist()], topk)
        bad = False
        rows = []
        for node in range(n):
            marked, steps, ok = _walk(parents, node, depth)
            bad |= not ok
            rows.append([j in marked for j in range(n)])
            positions.append(seq_lens[r] + steps)
        invalid.append(int(bad))
        for node in range(n):
            children = [j for j in range(n) if parents[j] == node]
            first.append(children[0] if children else -1)
            later = [j for j in range(node + 1, n)
                     if parents[node] >= 0 and parents[j] == parents[node]]
            sibling.append(later[0] if later else -1)
        tokens.append(int(inputs.bonus_tokens[r]))
        tokens.extend(int(v) for v in inputs.draft_tokens[r].tolist())
        qlen.extend(v for row in rows for v in row)
        words.extend(_signed(sum(1 << j for j in range(n) if row[j]), dtype) for row in rows)
        s = seq_lens[r]
        for node in range(n):
            row_start = start + node * (s + n)
            for c in range(s):
                full[row_start + c] = inputs.fill_prefix_mask
            for j in range(n):
                full[row_start + s + j] = rows[node][j]
        start += n * (s + n)
    mask = {
        "qlen_only": torch.tensor(qlen, dtype=torch.bool),
        "qlen_only_bitpacking": torch.tensor(words, dtype=torch.int64).to(dtype),
        "full": torch.tensor(full, dtype=torch.bool),
    }[inputs.mask_mode]
    return TreeBuildResult(
        tree_mask=mask,
        positions=torch.tensor(positions, dtype=torch.int64),
        retrieve_index=torch.arange(batch * n, dtype=torch.int64).view(batch, n),
        retrieve_next_token=torch.tensor(first, dtype=torch.int64).view(batch, n),
        retrieve_next_sibling=torch.tensor(sibling, dtype=torch.int64).view(batch, n),
        draft_tokens=torch.tensor(tokens, dtype=torch.int64),
        invalid=torch.tensor(invalid, dtype=torch.int32),
        mask_mode=inputs.mask_mode,
        num_verify_tokens=n,
    )
