"""The plain per-row rules of the sampling primitives, as loops over Python numbers (the oracle).

`coin_reference` is the seeded coin hash on Python ints (murmur3's block step and finalizer),
`inverse_cdf_reference` the correction / bonus draw, `residual_reference` the residual with its
fallback to p, `exponential_race_reference` the race `argmax(p / E)`, `block_race_reference` the
verifiers' two-level race on the counter-based stream. Float32 rounding is
reproduced with `f32`, so results equal the torch implementation's exactly.
"""

from __future__ import annotations

import struct

from specreg.kernels.random_stream.reference import exponential_of, token_word
from specreg.kernels.random_stream.types import BLOCK_KEY_BASE, RACE_BLOCK

_MASK32 = 0xFFFFFFFF


def f32(value: float) -> float:
    """`value` rounded to float32 (the product or difference of two float32 values is exact in a
    double, so rounding it once gives the float32 result)."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _mul32(a: int, b: int) -> int:
    return (a * b) & _MASK32


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & _MASK32


def _fmix(h: int) -> int:
    h ^= h >> 16
    h = _mul32(h, 0x85EBCA6B)
    h ^= h >> 13
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def _absorb(h: int, word: int) -> int:
    k = _mul32(word & _MASK32, 0xCC9E2D51)
    k = _mul32(_rotl(k, 15), 0x1B873593)
    h = _rotl(h ^ k, 13)
    return _fmix((_mul32(h, 5) + 0xE6546B64) & _MASK32)


def coin_reference(seed: int, offset: int, column: int) -> float:
    """The seeded coin of (seed, offset, column): the top 24 bits of the hash, times 2**-24."""
    h = _fmix((seed & _MASK32) ^ 0x9E3779B9)
    for word in ((seed >> 32) & _MASK32, offset & _MASK32, (offset >> 32) & _MASK32, column):
        h = _absorb(h, word)
    return (h >> 8) * 2.0**-24


def inverse_cdf_reference(weights: list[float], coin: float) -> int:
    """The first index with positive weight whose running sum exceeds coin * total (float32
    values, running sums in double, like torch's CPU cumsum); the last positive index when
    rounding runs past the end; 0 for a row without mass."""
    total = f32(sum(weights))
    target = f32(coin * total)
    running = 0.0
    last = 0
    for index, weight in enumerate(weights):
        running += weight
        if weight > 0:
            last = index
            if f32(running) > target:
                return index
    return last


def residual_reference(
    p_row: list[float], q_row: list[float] | None = None, exclude: int = -1
) -> list[float]:
    """max(p - q, 0) per token (or p without `exclude` when `q_row` is None); p itself when the
    residual has no mass."""
    if q_row is not None:
        residual = [max(f32(p - q), 0.0) for p, q in zip(p_row, q_row, strict=True)]
    else:
        residual = [0.0 if v == exclude else p for v, p in enumerate(p_row)]
    return residual if any(w > 0 for w in residual) else list(p_row)


def exponential_race_reference(p_row: list[float], noise: list[float]) -> int:
    """The first index of the largest p / E (E clamped to float32's smallest normal)."""
    tiny = 2.0**-126
    best, best_value = 0, None
    for index, (p, e) in enumerate(zip(p_row, noise, strict=True)):
        value = f32(p / max(e, tiny))
        if best_value is None or value > best_value:
            best, best_value = index, value
    return best


def block_masses_reference(weights: list[float], block: int) -> list[float]:
    """Each block's mass as the kernels sum it: the block padded with zeros to `block` (a power
    of two), then halves added elementwise (`x[:h] + x[h:]`, float32) until one value is left."""
    masses = []
    for start in range(0, len(weights), block):
        values = weights[start : start + block]
        values = values + [0.0] * (block - len(values))
        while len(values) > 1:
            half = len(values) // 2
            values = [f32(a + b) for a, b in zip(values[:half], values[half:], strict=True)]
        masses.append(values[0])
    return masses


def block_race_reference(weights: list[float], lanes: tuple[int, int]) -> int:
    """The exponential race `argmax(w / E)` in two levels, with the stream's exponentials under
    the key `lanes`: the block of largest mass / E_block (E of token key BLOCK_KEY_BASE + j),
    then within it the token of largest w / E_token (first index on ties; scores in float64).
    Exact: P(block j) = m_j / M and P(token | block j) = w / m_j. A row without mass gives 0."""
    def first_argmax(scores: list[float]) -> int:
        best = 0
        for index, score in enumerate(scores):
            if score > scores[best]:
                best = index
        return best

    masses = block_masses_reference(weights, RACE_BLOCK)
    block = first_argmax(
        [m / exponential_of(token_word(lanes, BLOCK_KEY_BASE + j)) for j, m in enumerate(masses)]
    )
    tokens = range(block * RACE_BLOCK, min((block + 1) * RACE_BLOCK, len(weights)))
    return tokens[first_argmax(
        [weights[t] / exponential_of(token_word(lanes, t)) for t in tokens]
    )]
