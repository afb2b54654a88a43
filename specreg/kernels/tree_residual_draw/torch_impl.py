"""The final token of tree sampling in torch: one read of the residual row, drawn by the race.

See the package docstring for the rule. The weights' block masses (`block_masses_torch`: the
summation order every backend and the reference share) come from one read of the row, in
cache-sized chunks of requests on CPU; the race picks a block, then the token within it from
that block's `RACE_BLOCK` weights gathered again. The blocks holding a tried token have their
weights set before the masses are summed, so the row itself is read once.
"""

from __future__ import annotations

import torch

from specreg.kernels.block_race import (
    block_columns,
    block_masses_torch,
    race_blocks_torch,
    race_tokens_torch,
)
from specreg.kernels.row_chunks import CPU_CHUNK_ELEMENTS


class _Residual:
    """The weights of the final draw at given rows of p (and q): p without the tried tokens
    (target-only rows), or max(p - coef q, 0) with the tried tokens at their frozen
    coefficients (recursive-rejection rows, `rrs`)."""

    def __init__(self, flat_p, flat_q, index, rrs, coef, tried_tok, tried_val, live):
        self.flat_p, self.flat_q, self.index = flat_p, flat_q, index
        self.rrs = rrs if flat_q is not None and rrs is not None else None
        self.coef, self.tried_tok, self.tried_val, self.live = coef, tried_tok, tried_val, live

    def at(self, tokens: torch.Tensor, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """Weights [k, T] at tokens [k, T] (in range) of the requests start:stop. A tried
        token's weight is `moving + (frozen - moving)`, as the row pass and the Triton kernel
        set it, so both levels of the race read the same bits."""
        sl = slice(start, stop)
        rows = self.index[sl].unsqueeze(1)
        weights = self.flat_p[rows, tokens].to(torch.float32)
        if self.rrs is not None:
            q = self.flat_q[rows, tokens].to(torch.float32)
            moving = torch.addcmul(weights, q, self.coef[sl].unsqueeze(1), value=-1.0).clamp_min(0)
        # A token's frozen coefficient, where it was tried at this node.
        hit = (tokens.unsqueeze(2) == self.tried_tok[sl].unsqueeze(1)) & self.live[sl].unsqueeze(1)
        tried = hit.any(2)
        if self.rrs is None:
            return torch.where(tried, 0.0, weights)
        frozen_coef = (hit * self.tried_val[sl].unsqueeze(1)).sum(2)
        frozen = torch.addcmul(weights, q, frozen_coef, value=-1.0).clamp_min(0)
        residual = torch.where(tried, moving + (frozen - moving), moving)
        return torch.where(self.rrs[sl].unsqueeze(1), residual, torch.where(tried, 0.0, weights))

    def block_masses(self, vocab: int) -> torch.Tensor:
        """Float32 race block masses [k, blocks] of the weights, the row read once per request."""
        k = self.index.shape[0]
        device = self.index.device
        masses = torch.empty(k, -(-vocab // 128), dtype=torch.float32, device=device)
        step = k if device.type != "cpu" else max(1, CPU_CHUNK_ELEMENTS // max(vocab, 1))
        buffer = torch.empty(min(step, k), vocab, dtype=torch.float32, device=device)
        q_buffer = torch.empty_like(buffer) if self.rrs is not None else None
        for start in range(0, k, step):
            stop = min(start + step, k)
            rows = _take(self.flat_p, self.index[start:stop], buffer)
            if self.rrs is not None:
                q = _take(self.flat_q, self.index[start:stop], q_buffer)
                a = self.coef[start:stop].unsqueeze(1)
                moving = torch.addcmul(rows, q, a, value=-1.0, out=q).clamp_min_(0)
                torch.where(self.rrs[start:stop].unsqueeze(1), moving, rows, out=rows)
            # Tried tokens are distinct among the live slots: adding deltas sets them.
            tok, live = self.tried_tok[start:stop], self.live[start:stop]
            current = rows.gather(1, tok)
            want = self.at(tok, start, stop) if self.rrs is not None else 0.0
            rows.scatter_add_(1, tok, torch.where(live, want - current, 0.0))
            masses[start:stop] = block_masses_torch(rows)
        return masses


def _take(flat: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    if flat.dtype == torch.float32:
        return torch.index_select(flat, 0, index, out=out[: index.shape[0]])
    return flat.index_select(0, index).to(torch.float32)


def final_tokens(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    last: torch.Tensor,
    rrs: torch.Tensor | None,
    coef: torch.Tensor | None,
    tried_tok: torch.Tensor,
    tried_val: torch.Tensor | None,
    live: torch.Tensor,
    lanes: torch.Tensor,
) -> torch.Tensor:
    """The final token per request [b], raced from the residual at node `last` under the key
    lanes `lanes` int64 [b, 2] (`draw_lanes_torch` of the request's key, role and position).

    Target-only rows (`rrs` False or None): p without the tried tokens `tried_tok` [b, T]
    (where `live`; each token once). Recursive-rejection rows: max(p - coef q, 0), the tried
    tokens at their frozen coefficients `tried_val`. Rows without mass race on p (same lanes)."""
    b, n, vocab = target_probs.shape
    device = target_probs.device
    flat_p = target_probs.reshape(b * n, vocab)
    flat_q = draft_probs.reshape(b * n, vocab) if draft_probs is not None else None
    index = torch.arange(b, device=device) * n + last
    tok = tried_tok.clamp(0, vocab - 1)
    residual = _Residual(flat_p, flat_q, index, rrs, coef, tok, tried_val, live)
    plain = _Residual(flat_p, None, index, None, None, tok, None, torch.zeros_like(live))
    masses = residual.block_masses(vocab)
    empty = ~(masses.amax(-1) > 0)
    if device.type != "cpu" or bool(empty.any()):
        masses = torch.where(empty.unsqueeze(1), plain.block_masses(vocab), masses)
    columns, inside = block_columns(race_blocks_torch(masses, lanes), vocab)
    weights = torch.where(empty.unsqueeze(1), plain.at(columns), residual.at(columns))
    return race_tokens_torch(torch.where(inside, weights, 0.0), columns, lanes)
