"""The two-level race on the random stream, compiled for the CPU (numba): shared by the
families' compiled paths (`chain.numba_kernels`, `tree_verify_sampling.numba_kernels`).

Imported only by those modules, and only when numba is installed (this module imports it). The
stream's words are murmur3's steps on int64 holding 32-bit words, as `random_stream.torch_impl`
computes them (a product wraps modulo 2**64 and is masked to its exact low 32 bits); rows are
read as their raw bits (`as_float32`); a block's mass is `block_race._halving_sum`'s order
(`halve`); the race's argmax is torch.argmax's of float64 weight / float64 E (`first_argmax`).
The exponentials E stay torch's (`random_stream.exponentials_of`), outside these passes.
"""

from __future__ import annotations

import numba
import numpy as np
from llvmlite import ir
from numba.core import types
from numba.extending import intrinsic

from specreg.kernels.random_stream.types import (
    BLOCK_KEY_BASE,
    LANE_STARTS,
    MASK32,
    RACE_BLOCK,
    RESIDUAL_ROLE,
    SAMPLE_ROLE,
)


def _fmix_int(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & MASK32
    return h ^ (h >> 16)


#: Murmur3's constants, the lanes' start values after the finalizer, the race's block key base,
#: as int64 scalars (compile-time constants of the passes).
M32 = np.int64(MASK32)
C1, C2 = np.int64(0xCC9E2D51), np.int64(0x1B873593)
F1, F2 = np.int64(0x85EBCA6B), np.int64(0xC2B2AE35)
N1, N2 = np.int64(5), np.int64(0xE6546B64)
L0, L1 = np.int64(_fmix_int(LANE_STARTS[0])), np.int64(_fmix_int(LANE_STARTS[1]))
BLOCK_BASE, BLOCK = np.int64(BLOCK_KEY_BASE), RACE_BLOCK
RESIDUAL, SAMPLE = np.int64(RESIDUAL_ROLE), np.int64(SAMPLE_ROLE)
#: Every compiled pass: cached on disk, released GIL, no fastmath (IEEE order kept).
njit = numba.njit(cache=True, nogil=True)
_njit = njit


@_njit
def absorb(h, word):
    k = ((word & M32) * C1) & M32
    k = ((((k << 15) | (k >> 17)) & M32) * C2) & M32
    h = h ^ k
    h = ((h << 13) | (h >> 19)) & M32
    h = ((h * N1) + N2) & M32
    h = h ^ (h >> 16)
    h = (h * F1) & M32
    h = h ^ (h >> 13)
    h = (h * F2) & M32
    return h ^ (h >> 16)


@_njit
def key_lanes(key, role, position, out):
    """The two key lanes of (key, role, position) into out[0], out[1] (`key_words_torch`)."""
    h0, h1 = L0, L1
    for value in (key, role, position):
        low, high = value & M32, (value >> 32) & M32
        h0 = absorb(absorb(h0, low), high)
        h1 = absorb(absorb(h1, low), high)
    out[0], out[1] = h0, h1


@_njit
def token_word(lane0, lane1, token):
    return absorb(absorb(lane0, token), lane1)


@intrinsic
def as_float32(typingctx, raw, shift):
    """The float32 whose bits are `raw` (an unsigned integer of at most 32 bits) shifted left
    by `shift`: a float32 read as uint32 (shift 0), a bfloat16 read as uint16 (shift 16)."""
    sig = types.float32(raw, shift)

    def codegen(context, builder, signature, args):
        value, by = args
        word = ir.IntType(32)
        if value.type.width < 32:
            value = builder.zext(value, word)
        by = builder.trunc(by, word) if by.type.width > 32 else builder.zext(by, word)
        return builder.bitcast(builder.shl(value, by), ir.FloatType())

    return sig, codegen


@_njit
def raw_value(src, r, i, x, shift):
    """The float32 value of one raw element."""
    return as_float32(src[r, i, x], shift)


@_njit
def halve(half):
    """The sum of a block whose first level (halves added elementwise) is in `half`
    [BLOCK // 2]: the remaining levels of `block_race._halving_sum`, in place."""
    width = BLOCK // 2
    while width > 1:
        width //= 2
        for j in range(width):
            half[j] = half[j] + half[j + width]
    return half[0]


@_njit
def first_argmax(weights, noise):
    """torch.argmax of float64(weights) / float64(noise): the first maximum, a NaN winning."""
    best, top = 0, np.float64(weights[0]) / np.float64(noise[0])
    for j in range(1, weights.shape[0]):
        if top != top:
            break
        v = np.float64(weights[j]) / np.float64(noise[j])
        if v != v or v > top:
            best, top = j, v
    return best


@_njit
def race_blocks(masses, noise, lanes, vocab, block, token_words):
    """The race's second pass: the winning block of each request and the words of its token ids (clamped
    into the vocabulary, as `block_race.block_columns`)."""
    for r in range(masses.shape[0]):
        block[r] = first_argmax(masses[r], noise[r])
        for t in range(BLOCK):
            column = min(block[r] * BLOCK + t, vocab - 1)
            token_words[r, t] = token_word(lanes[r, 0], lanes[r, 1], np.int64(column))
