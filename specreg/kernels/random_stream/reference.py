"""The counter-based random stream on Python ints and floats, one value at a time (the oracle).

Every value is a pure function of (seed, request, position, token): no state, no generator,
nothing that depends on the rest of the batch. The words are murmur3's block step and
finalizer over 32-bit words; the uniform is the word's top 23 bits plus one half, times 2**-23
(so 0 < u < 1 exactly, and float32 holds it exactly); the exponential is
`-log((word + 0.5) * 2**-32)` of the whole 32-bit word, computed in float64 and rounded once to
float32. Math libraries differ in float64 `log` by
at most an ulp, so the rounded float32 values agree across backends except when a result lies
within 2**-52 of a float32 rounding boundary (about one value in 2**28).
"""

from __future__ import annotations

import math
import struct

from specreg.kernels.random_stream.types import ACCEPT_ROLE, LANE_STARTS, MASK32, UNIFORM_BITS


def f32(value: float) -> float:
    """`value` rounded to float32."""
    return struct.unpack("f", struct.pack("f", value))[0]


def _mul32(a: int, b: int) -> int:
    return (a * b) & MASK32


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & MASK32


def fmix32(h: int) -> int:
    """murmur3's 32-bit finalizer."""
    h ^= h >> 16
    h = _mul32(h, 0x85EBCA6B)
    h ^= h >> 13
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> 16)


def absorb(h: int, word: int) -> int:
    """Mix one 32-bit word into the running hash: murmur3's block step, then the finalizer."""
    k = _mul32(word & MASK32, 0xCC9E2D51)
    k = _mul32(_rotl(k, 15), 0x1B873593)
    h = _rotl(h ^ k, 13)
    return fmix32((_mul32(h, 5) + 0xE6546B64) & MASK32)


def key_words(seed: int, request: int, position: int) -> tuple[int, int]:
    """The two 32-bit key lanes of one (seed, request, position): each lane absorbs the six
    32-bit halves of the three int64 values from its own start."""
    halves = []
    for value in (seed, request, position):
        value &= 0xFFFFFFFFFFFFFFFF
        halves += [value & MASK32, value >> 32]
    lanes = []
    for start in LANE_STARTS:
        h = fmix32(start)
        for word in halves:
            h = absorb(h, word)
        lanes.append(h)
    return lanes[0], lanes[1]


def draw_lanes(key: int, role: int, position: int) -> tuple[int, int]:
    """The key lanes of the draws of (request key, role, absolute position): the stream key
    (seed, request, position) = (key, role, position)."""
    return key_words(key, role, position)


def token_word(key: tuple[int, int], token: int) -> int:
    """The 32-bit word of `token` (0 <= token < 2**32) under a key: absorb the token, then the
    second lane."""
    return absorb(absorb(key[0], token), key[1])


def uniform_of(word: int) -> float:
    """The float32 uniform in (0, 1) of a word: ((word >> 9) + 0.5) * 2**-23."""
    return ((word >> (32 - UNIFORM_BITS)) + 0.5) * 2.0**-UNIFORM_BITS


def exponential_of(word: int) -> float:
    """The Exp(1) value of a word: float32(-log((word + 0.5) * 2**-32)), in (0, 22.9]."""
    return f32(-math.log((word + 0.5) * 2.0**-32))


def accept_coin(key: int, position: int, token: int) -> float:
    """The acceptance uniform of draft `token` at absolute `position` under request `key`."""
    return uniform_of(token_word(key_words(key, ACCEPT_ROLE, position), token & MASK32))


def stream_uniform_reference(seed: int, request: int, position: int, token: int) -> float:
    return uniform_of(token_word(key_words(seed, request, position), token))


def stream_exponential_reference(seed: int, request: int, position: int, token: int) -> float:
    return exponential_of(token_word(key_words(seed, request, position), token))
