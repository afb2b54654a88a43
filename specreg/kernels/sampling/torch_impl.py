"""The torch implementation of the sampling primitives: coin hashing, races, residuals, draws.

Inputs are validated by the public wrappers (`specreg.kernels.sampling`); the verifiers' torch
paths call these directly. The verifiers' two-level exponential race on the random stream
lives here too (`block_masses_torch`, `race_blocks_torch`, `race_tokens_torch`,
`block_race_torch`; the Triton twin is `specreg.kernels.chain.triton_impl.emit_token`). The
CPU-tuned pieces: the binary-search inverse CDF (`inverse_cdf_from_cdf`), the cache-sized row
chunks (`cpu_row_chunks`) and the row gather into a reused buffer (`take_rows_float32`).
"""

from __future__ import annotations

import torch

from specreg.kernels.random_stream.torch_impl import exponentials_of, token_words_torch
from specreg.kernels.random_stream.types import BLOCK_KEY_BASE, RACE_BLOCK

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


#: Elements per chunk of the CPU row loops (about 1 MiB of float32): temporaries stay in cache
#: and are reused instead of freshly mapped (page faults dominate full-batch temporaries).
CPU_CHUNK_ELEMENTS = 1 << 18


def cpu_row_chunks(
    num_rows: int, vocab: int, elements: int = CPU_CHUNK_ELEMENTS
) -> list[tuple[int, int]]:
    """[start, stop) row ranges of at most `elements` elements (at least one row)."""
    step = max(1, elements // max(vocab, 1))
    return [(start, min(start + step, num_rows)) for start in range(0, num_rows, step)]


def take_rows_float32(
    flat: torch.Tensor, index: torch.Tensor, out: torch.Tensor | None = None
) -> torch.Tensor:
    """`flat[index]` as float32 [len(index), V]; written into `out` (float32, at least that many
    rows) when given and `flat` is float32, else a fresh tensor. The rows are values to draw
    from, never differentiated: a `flat` that requires grad (a model's output outside
    `torch.no_grad()`) is read detached, since `out=` refuses autograd inputs."""
    flat = flat.detach()
    if out is not None and flat.dtype == torch.float32:
        return torch.index_select(flat, 0, index, out=out[: index.shape[0]])
    return flat.index_select(0, index).to(torch.float32)


def block_masses_torch(weights: torch.Tensor, block: int = RACE_BLOCK) -> torch.Tensor:
    """float32 [k, ceil(V / block)] block masses of float32 `weights` [k, V], summed as the
    Triton kernels and the reference sum them (zero padding, then halves added elementwise), so
    every backend gets the same bits."""
    k, vocab = weights.shape
    full = vocab // block
    parts = []
    if full:
        parts.append(_halving_sum(weights[:, : full * block].reshape(k, full, block)))
    if vocab % block:
        tail = weights.new_zeros((k, 1, block))
        tail[:, 0, : vocab % block] = weights[:, full * block :]
        parts.append(_halving_sum(tail))
    return parts[0] if len(parts) == 1 else torch.cat(parts, dim=1)


def _halving_sum(x: torch.Tensor) -> torch.Tensor:
    """[k, m, block] -> [k, m]: x[..., :h] + x[..., h:] until one value is left."""
    while x.shape[-1] > 1:
        half = x.shape[-1] // 2
        x = x[..., :half] + x[..., half:]
    return x[..., 0]


def race_blocks_torch(masses: torch.Tensor, lanes: torch.Tensor) -> torch.Tensor:
    """The winning block per row: first argmax of mass / E_block (float64), E of the stream's
    token key BLOCK_KEY_BASE + j under the row's key `lanes` int64 [k, 2]."""
    keys = BLOCK_KEY_BASE + torch.arange(masses.shape[1], dtype=torch.int64, device=masses.device)
    noise = exponentials_of(token_words_torch((lanes[:, :1], lanes[:, 1:]), keys))
    return torch.argmax(masses.to(torch.float64) / noise.to(torch.float64), dim=-1)


def race_tokens_torch(
    block_weights: torch.Tensor, columns: torch.Tensor, lanes: torch.Tensor
) -> torch.Tensor:
    """The winning token per row within its block: `columns` int64 [k, RACE_BLOCK] the block's
    token ids, `block_weights` their float32 weights (0 past the vocabulary); first argmax of
    w / E_token (float64)."""
    noise = exponentials_of(token_words_torch((lanes[:, :1], lanes[:, 1:]), columns))
    best = torch.argmax(block_weights.to(torch.float64) / noise.to(torch.float64), dim=-1)
    return columns.gather(1, best[:, None]).squeeze(1)


def block_columns(blocks: torch.Tensor, vocab: int) -> tuple[torch.Tensor, torch.Tensor]:
    """Token ids [k, RACE_BLOCK] of each row's block (clamped into the vocabulary) and the
    mask of those inside it."""
    offsets = torch.arange(RACE_BLOCK, dtype=torch.int64, device=blocks.device)
    columns = blocks[:, None] * RACE_BLOCK + offsets
    inside = columns < vocab
    return columns.clamp_max(vocab - 1), inside


def block_race_torch(weights: torch.Tensor, lanes: torch.Tensor) -> torch.Tensor:
    """`block_race_reference` for float32 rows `weights` [k, V] under key lanes [k, 2]."""
    blocks = race_blocks_torch(block_masses_torch(weights), lanes)
    columns, inside = block_columns(blocks, weights.shape[1])
    return race_tokens_torch(
        torch.where(inside, weights.gather(1, columns), 0.0), columns, lanes
    )


#: A token's weight exp(z - max z) is 0 when z - max z <= EXP_FLOOR, on every backend (`exp_`,
#: the Triton filter's `exp_weight`, the filtering reference): e**-87 is 1.6e-38, the bottom of
#: float32's normal range, so no kept weight is subnormal (GPUs flush those) and the CPU exp
#: never leaves its vector path.
EXP_FLOOR = -87.0
_FLOOR_VALUES: dict[torch.device, float] = {}


def _floor_value(device: torch.device) -> float:
    """exp(EXP_FLOOR) as this device's exp computes it (once per device)."""
    value = _FLOOR_VALUES.get(device)
    if value is None:
        value = float(torch.tensor(EXP_FLOOR, device=device).exp())
        _FLOOR_VALUES[device] = value
    return value


def exp_(x: torch.Tensor) -> torch.Tensor:
    """The one exp of the torch sampling path: exp(x) in place, 0 for x <= `EXP_FLOOR`; returns
    `x`. Every processed value (the filters' weights and masses, the rows the race reads, the
    single-token probability of the acceptance test, the logprobs) goes through it.

    torch's exp, not exp2(x * log2(e)): torch's CPU exp2 computes a tensor's last few elements
    with a scalar exp2 that differs from its vector one by an ulp, so one token's value depended
    on the tensor it sat in; torch's exp (MKL's vector exp on CPU) gives every element the same
    bits wherever it sits. That exp leaves its vector path for lanes far below zero (-inf from
    a grammar mask or a cut: 2-7x the time, subnormal results 20x), so lanes are clamped to
    `EXP_FLOOR` first and their results, exp(EXP_FLOOR) or below, set to 0 (`threshold_`; NaN
    stays NaN): one speed for every input, the same as exp2's (0.22 ms per 512k elements for
    both on plain, -inf-masked or subnormal rows; torch 2.13, AVX-512, one thread)."""
    floor = _floor_value(x.device)
    return torch.nn.functional.threshold_(x.clamp_min_(EXP_FLOOR).exp_(), floor, 0.0)


def _zero_lanes(p: torch.Tensor) -> torch.Tensor | None:
    """The mask p <= 0 of float32 probabilities when a CPU block holds such lanes (one min pass
    finds out), else None."""
    return p <= 0 if p.numel() and bool(p.amin() <= 0) else None


def log_(p: torch.Tensor, *, fresh: bool = False) -> torch.Tensor:
    """The one log of the torch sampling path on float32 probabilities: log(p), -inf where
    p <= 0 (the -inf padding of a prefix included), in place (or into a new tensor with
    `fresh`). On CPU, torch's log (MKL's vector log: the same bits wherever a value sits) takes
    25x as long on zeros as on normal values, so a block holding any has them set to 1 for the
    log and to -inf after."""
    zero = _zero_lanes(p) if p.device.type == "cpu" else None
    if zero is None:
        return torch.log(p) if fresh else p.log_()
    ones = p.masked_fill(zero, 1.0) if fresh else p.masked_fill_(zero, 1.0)
    return ones.log_().masked_fill_(zero, float("-inf"))


def log_keys_(p: torch.Tensor) -> torch.Tensor:
    """`log_(p, fresh=True)`, and `p` made the filters' key in place: lanes p <= 0 set to -inf
    (a zero probability is a masked token, as its log says). One zero test serves both."""
    if p.device.type != "cpu":
        out = torch.log(p)
        p.masked_fill_(p <= 0, float("-inf"))
        return out
    zero = _zero_lanes(p)
    if zero is None:
        return torch.log(p)
    out = p.masked_fill(zero, 1.0).log_().masked_fill_(zero, float("-inf"))
    p.masked_fill_(zero, float("-inf"))
    return out
