"""The final token of tree sampling in torch: one read of the residual row, drawn in two levels.

See the package docstring for the rule. The draw is the inverse CDF of the reference (the first token with positive weight whose
running weight exceeds `coin * total`), taken in two levels so that no cumulative sum runs
over the whole row: the `DRAW_BLOCK`-token block sums of the row (one reduction, float32),
the first block whose running sum (float64) passes the target, then the running sum inside
that block alone. The Triton kernel draws the same way, block for block. The blocks holding
a tried token are summed again from their `DRAW_BLOCK` weights with the tried tokens set, so
the row itself is read once, in cache-sized chunks of requests on CPU.
"""

from __future__ import annotations

import torch

from specreg.kernels.sampling.torch_impl import CPU_CHUNK_ELEMENTS

#: Tokens per block of the two-level draw (the Triton kernel's tile is a multiple of it).
DRAW_BLOCK = 128


def block_sums(rows: torch.Tensor) -> torch.Tensor:
    """Float32 sums [k, ceil(V / DRAW_BLOCK)] of `DRAW_BLOCK`-token blocks of rows [k, V]."""
    k, vocab = rows.shape
    full = vocab // DRAW_BLOCK
    sums = rows[:, : full * DRAW_BLOCK].unflatten(1, (full, DRAW_BLOCK)).sum(-1)
    if full * DRAW_BLOCK == vocab:
        return sums
    return torch.cat([sums, rows[:, full * DRAW_BLOCK:].sum(-1, keepdim=True)], 1)


class _Residual:
    """The weights of the final draw at given rows of p (and q): p without the tried tokens
    (target-only rows), or max(p - coef q, 0) with the tried tokens at their frozen
    coefficients (recursive-rejection rows, `rrs`)."""

    def __init__(self, flat_p, flat_q, index, rrs, coef, tried_tok, tried_val, live):
        self.flat_p, self.flat_q, self.index = flat_p, flat_q, index
        self.rrs = rrs if flat_q is not None and rrs is not None else None
        self.coef, self.tried_tok, self.tried_val, self.live = coef, tried_tok, tried_val, live

    def at(self, tokens: torch.Tensor, start: int = 0, stop: int | None = None) -> torch.Tensor:
        """Weights [k, T] at tokens [k, T] (in range) of the requests start:stop."""
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
        residual = torch.where(tried, frozen, moving)
        return torch.where(self.rrs[sl].unsqueeze(1), residual, torch.where(tried, 0.0, weights))

    def block_sums(self, vocab: int) -> torch.Tensor:
        """Float32 block sums [k, blocks] of the weights, the row read once per request."""
        k = self.index.shape[0]
        device = self.index.device
        blocks = -(-vocab // DRAW_BLOCK)
        sums = torch.empty(k, blocks, dtype=torch.float32, device=device)
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
            sums[start:stop] = block_sums(rows)
        return sums


def _take(flat: torch.Tensor, index: torch.Tensor, out: torch.Tensor) -> torch.Tensor:
    if flat.dtype == torch.float32:
        return torch.index_select(flat, 0, index, out=out[: index.shape[0]])
    return flat.index_select(0, index).to(torch.float32)


def two_level_draw(residual: _Residual, sums: torch.Tensor, coins: torch.Tensor, vocab: int):
    """(token [k], empty [k] bool): the inverse-CDF draw from block sums [k, blocks] of the
    weights `residual`, and the rows without mass (their token is meaningless).

    Running sums of weights >= 0 are nondecreasing, so the first entry above the target is the
    number of entries at or below it, and has positive weight (it is where the sum grew)."""
    blocks = sums.shape[1]
    running = sums.to(torch.float64).cumsum(-1)
    total = running[:, -1]
    target = (coins.to(torch.float64) * total).unsqueeze(1)
    block = (running <= target).sum(-1).clamp_max(blocks - 1)
    first = block == 0
    before = torch.where(first.unsqueeze(1), 0.0, running.gather(1, (block - 1).clamp_min(0).unsqueeze(1)))
    slots = torch.arange(DRAW_BLOCK, device=sums.device)
    tokens = (block * DRAW_BLOCK).unsqueeze(1) + slots
    weights = residual.at(tokens.clamp_max(vocab - 1)) * (tokens < vocab)
    cum = weights.to(torch.float64).cumsum(-1).add_(before)
    slot = (cum <= target).sum(-1)
    # Rounding between the float32 block sum and the float64 sum inside: the last positive.
    spill = slot >= DRAW_BLOCK
    if bool(spill.any()) if sums.device.type == "cpu" else True:
        last_in = torch.where(weights > 0, slots, 0).amax(-1)
        slot = torch.where(spill, last_in, slot)
    return block * DRAW_BLOCK + slot, ~(total > 0)


def final_tokens(
    target_probs: torch.Tensor,
    draft_probs: torch.Tensor | None,
    last: torch.Tensor,
    rrs: torch.Tensor | None,
    coef: torch.Tensor | None,
    tried_tok: torch.Tensor,
    tried_val: torch.Tensor | None,
    live: torch.Tensor,
    final_coins: torch.Tensor,
) -> torch.Tensor:
    """The final token per request [b], drawn from the residual at node `last`.

    Target-only rows (`rrs` False or None): p without the tried tokens `tried_tok` [b, T]
    (where `live`; each token once). Recursive-rejection rows: max(p - coef q, 0), the tried
    tokens at their frozen coefficients `tried_val`. Rows without mass fall back to p."""
    b, n, vocab = target_probs.shape
    device = target_probs.device
    flat_p = target_probs.reshape(b * n, vocab)
    flat_q = draft_probs.reshape(b * n, vocab) if draft_probs is not None else None
    index = torch.arange(b, device=device) * n + last
    tok = tried_tok.clamp(0, vocab - 1)
    residual = _Residual(flat_p, flat_q, index, rrs, coef, tok, tried_val, live)
    bonus, empty = two_level_draw(residual, residual.block_sums(vocab), final_coins, vocab)
    if device.type != "cpu" or bool(empty.any()):
        plain = _Residual(flat_p, None, index, None, None, tok, None, torch.zeros_like(live))
        fallback, _ = two_level_draw(plain, plain.block_sums(vocab), final_coins, vocab)
        bonus = torch.where(empty, fallback, bonus)
    return bonus
