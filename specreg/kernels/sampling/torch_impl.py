"""The torch implementation of the sampling primitives: coin hashing, races, residuals, draws.

Inputs are validated by the public wrappers (`specreg.kernels.sampling`). The CPU-tuned piece:
the binary-search inverse CDF (`inverse_cdf_from_cdf`). The verifiers' two-level exponential
race on the random stream is `specreg.kernels.block_race`, the row chunks
`specreg.kernels.row_chunks`, the one exp and log `specreg.kernels.exp_log`: modules every
family shares.
"""

from __future__ import annotations

import torch

_MASK32 = 0xFFFFFFFF
_COIN_BITS = 24
#: The largest coin `uniform_coins` returns with a seed: 1 - 2**-24 (exact in float32).
MAX_SEEDED_COIN = 1.0 - 2.0**-_COIN_BITS


def exponential_race_torch(
    probs: torch.Tensor, *, generator: torch.Generator | None, noise: torch.Tensor | None
) -> torch.Tensor:
    """`argmax(probs / E)` per row, E ~ Exp(1) (or `noise`) clamped to the smallest normal."""
    tiny = torch.finfo(torch.float32).tiny
    if noise is None:
        noise = torch.empty(probs.shape, dtype=torch.float32, device=probs.device)
        noise.exponential_(generator=generator)
    noise = noise.to(torch.float32).clamp_min(tiny)
    return torch.argmax(probs.to(torch.float32) / noise, dim=-1)


def _mul32(value: torch.Tensor, constant: int) -> torch.Tensor:
    """(value * constant) mod 2**32 for value in [0, 2**32), without int64 overflow."""
    low, high = constant & 0xFFFF, constant >> 16
    return (value * low + (((value * high) & 0xFFFF) << 16)) & _MASK32


def _fmix32(h: torch.Tensor) -> torch.Tensor:
    """The murmur3 32-bit finalizer on int64 tensors holding 32-bit values."""
    h = h ^ (h >> 16)
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> 13)
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def _absorb(h: torch.Tensor, word: torch.Tensor) -> torch.Tensor:
    """Mix one 32-bit word into the running hash (murmur3's block step, then the finalizer)."""
    k = _mul32(word & _MASK32, 0xCC9E2D51)
    k = ((k << 15) | (k >> 17)) & _MASK32
    k = _mul32(k, 0x1B873593)
    h = h ^ k
    h = ((h << 13) | (h >> 19)) & _MASK32
    h = (_mul32(h, 5) + 0xE6546B64) & _MASK32
    return _fmix32(h)


def hash_coins(
    seed: int | torch.Tensor, offsets: torch.Tensor, columns: torch.Tensor
) -> torch.Tensor:
    """Coins in [0, 1 - 2**-24] from (seed, offset, column); int64 tensors broadcast together
    (`seed` an int, or an int64 tensor of non-negative per-request seeds).

    Only integer tensor ops, so CPU and CUDA agree bit for bit. The top 24 bits of the hash become
    the coin, which float32 represents exactly.
    """
    if isinstance(seed, torch.Tensor):
        seed = seed.to(torch.int64)
        seed_low, seed_high = seed & _MASK32, (seed >> 32) & _MASK32
    else:
        seed_words = torch.tensor(
            [seed & _MASK32, (seed >> 32) & _MASK32], dtype=torch.int64, device=offsets.device
        )
        seed_low, seed_high = seed_words[0], seed_words[1]
    offsets = offsets.to(torch.int64)
    columns = columns.to(torch.int64)
    h = _fmix32(seed_low ^ 0x9E3779B9)
    h = _absorb(h, seed_high)
    h = _absorb(h, offsets & _MASK32)
    h = _absorb(h, (offsets >> 32) & _MASK32)
    h = _absorb(h, columns)
    return (h >> (32 - _COIN_BITS)).to(torch.float32) * (2.0**-_COIN_BITS)


def residual_weights_torch(
    p: torch.Tensor, q: torch.Tensor | None = None, *, exclude: torch.Tensor | None = None
) -> torch.Tensor:
    """`residual_weights` without the checks (the rule is in its docstring)."""
    p = p.to(torch.float32)
    if q is None:
        if exclude is None:
            return p
        vocab = torch.arange(p.shape[-1], device=p.device)
        residual = torch.where(vocab == exclude.unsqueeze(-1), 0.0, p)
    else:
        residual = (p - q.to(torch.float32)).clamp_min(0.0)
    empty = residual.sum(-1, keepdim=True) <= 0
    return torch.where(empty, p, residual)


def inverse_cdf_torch(weights: torch.Tensor, coins: torch.Tensor) -> torch.Tensor:
    """`inverse_cdf_sample` without the checks: float32 weights, their cumsum, the draw."""
    weights = weights.to(torch.float32)
    return inverse_cdf_from_cdf(weights, torch.cumsum(weights, dim=-1), coins)


def inverse_cdf_from_cdf(
    weights: torch.Tensor, cdf: torch.Tensor, coins: torch.Tensor, *, nonnegative: bool = False
) -> torch.Tensor:
    """`inverse_cdf_sample` given float32 `weights` [N, V] and their `cdf = cumsum(weights)`.

    The index is the number of cdf entries <= `coin * total` (clamped to V - 1), accepted when it
    has positive weight and cdf above the target, else the last positive index. On CPU, with
    weights known (or checked, one min pass) to be >= 0 and finite totals, the CPU cumsum
    (sequential, double accumulation) is monotone, so the count is a binary search
    (`searchsorted`) instead of a full pass, and the last positive index is computed only for
    the rows that need it. `nonnegative=True` skips the >= 0 check (the caller clamped).
    """
    vocab = weights.shape[-1]
    target = coins.to(torch.float32).unsqueeze(-1) * cdf[..., -1:]
    cpu = weights.device.type == "cpu"
    monotone = (
        cpu
        and weights.dim() == 2
        and bool(torch.isfinite(cdf[..., -1]).all())
        and (nonnegative or weights.numel() == 0 or bool(weights.amin() >= 0))
    )
    if monotone:
        index = torch.searchsorted(cdf, target, right=True).squeeze(-1).clamp_max(vocab - 1)
    else:
        index = (cdf <= target).sum(-1).clamp_max(vocab - 1)
    ok = (weights.gather(-1, index.unsqueeze(-1)).squeeze(-1) > 0) & (
        cdf.gather(-1, index.unsqueeze(-1)).squeeze(-1) > target.squeeze(-1)
    )
    if cpu:
        bad = (~ok).nonzero().squeeze(-1) if ok.dim() == 1 else None
        if bad is not None:
            if bad.numel():
                index = index.clone()
                index[bad] = _last_positive(weights[bad])
            return index.to(torch.int64)
    return torch.where(ok, index, _last_positive(weights)).to(torch.int64)


def _last_positive(weights: torch.Tensor) -> torch.Tensor:
    """The last index with weight > 0 per row (0 for a row without one)."""
    positions = torch.arange(weights.shape[-1], device=weights.device)
    return torch.where(weights > 0, positions, 0).amax(-1)
