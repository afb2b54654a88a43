"""Row argmax on CPU by folding each row onto a few columns, then a look at the winners only.

Why: torch's CPU argmax tracks an (index, value) pair per lane and runs at about a fifth of the
memory speed on one thread, while a max across chunks (`amax` over the chunk dimension) runs at
the speed of a read. For rows [R, V] cut into k chunks of W = FOLD_WIDTH columns (the last chunk
starts at V - W, overlapping the one before when W does not divide V):

1. `folded[r, j] = max over chunks t of rows[r, start_t + j]`: the one read of the row (NaN
   propagates through amax). `folded` is folded once more, onto GROUP columns, the same way.
2. The row maximum `m` is the max of the GROUP columns. From the top level down, a column is a
   candidate when it reaches `m` (or holds a NaN, when `m` is NaN); only candidates are expanded.
3. For each candidate column j, the first chunk t (chunk starts increase) where the row reaches
   `m` gives the index start_t + j; the answer is the smallest such index. Usually one
   candidate per row: a few dozen elements read besides the fold.

Rows with many top-level candidates (ties everywhere, e.g. an all -inf row) go to `torch.argmax`
instead of being expanded. Every comparison is on the original values, so the result equals
`torch.argmax` exactly.
"""

from __future__ import annotations

import torch

#: Columns each row is folded onto (its float32 accumulators stay in L1 cache).
FOLD_WIDTH = 1024
#: Columns the folded row is folded onto in turn (FOLD_WIDTH is a multiple of it).
GROUP = 32
#: Rows with more top-level candidate columns than this fall back to torch.argmax.
MAX_CANDIDATES = 4


def _reaches(values: torch.Tensor, best: torch.Tensor, nan_rows: torch.Tensor) -> torch.Tensor:
    """values [P, m] equal to the row maximum best [P] (NaN where the maximum is NaN)."""
    hits = values == best.unsqueeze(1)
    if bool(nan_rows.any()):
        hits = torch.where(nan_rows.unsqueeze(1), values.isnan(), hits)
    return hits


def row_argmax_folded_torch(rows: torch.Tensor, *, width: int = FOLD_WIDTH) -> torch.Tensor:
    """int64 [R]: `torch.argmax(rows, dim=1)` for float `rows` [R, V] with V >= width."""
    num_rows, vocab = rows.shape
    if rows.stride(1) != 1:
        rows = rows.contiguous()
    whole = vocab // width
    main = rows.narrow(1, 0, whole * width).unflatten(1, (whole, width))  # [R, k, W] view
    folded = main.amax(1)  # [R, W]
    starts = torch.arange(whole, dtype=torch.int64, device=rows.device) * width
    last_start = vocab - width
    partial = last_start > (whole - 1) * width
    if partial:  # fold the remaining columns in through an overlapping last chunk
        torch.maximum(folded, rows.narrow(1, last_start, width), out=folded)
        starts = torch.cat([starts, starts.new_tensor([last_start])])
    groups = folded.view(num_rows, width // GROUP, GROUP)  # column j = g * GROUP + c
    top = groups.amax(1)  # [R, GROUP]
    best = top.amax(1)
    nan_rows = best.isnan()

    out = torch.empty(num_rows, dtype=torch.int64, device=rows.device)
    row, lane = _reaches(top, best, nan_rows).nonzero(as_tuple=True)
    if row.numel() > num_rows:
        crowded = torch.bincount(row, minlength=num_rows) > MAX_CANDIDATES
        if bool(crowded.any()):
            crowded_rows = crowded.nonzero().squeeze(1)
            out[crowded_rows] = torch.argmax(rows.index_select(0, crowded_rows), dim=1)
            keep = ~crowded[row]
            row, lane = row[keep], lane[keep]
    pick, group = _reaches(groups[row, :, lane], best[row], nan_rows[row]).nonzero(as_tuple=True)
    row, column = row[pick], group * GROUP + lane[pick]
    values = main[row, :, column]  # [P, k]: the candidate column in every whole chunk
    if partial:
        values = torch.cat([values, rows[row, last_start + column].unsqueeze(1)], 1)
    first_chunk = _reaches(values, best[row], nan_rows[row]).to(torch.uint8).argmax(1)
    positions = starts[first_chunk] + column
    return out.scatter_reduce_(0, row, positions, "amin", include_self=False)
