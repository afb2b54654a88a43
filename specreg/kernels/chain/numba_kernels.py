"""The compiled passes of chain sampling's CPU path (numba `njit`, cached on disk, no fastmath).

Imported only by `numba_impl`, and only when numba is installed (this module imports it). The
passes and why their values have the torch path's bits are in `numba_impl`'s docstring. The
stream's words are murmur3's steps on int64 holding 32-bit words, as `random_stream.torch_impl`
computes them (a product wraps modulo 2**64 and is masked to its exact low 32 bits).
"""

from __future__ import annotations

import numba
import numpy as np

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

_njit = numba.njit(cache=True, nogil=True)


@_njit
def _absorb(h, word):
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
def _key_lanes(key, role, position, out):
    """The two key lanes of (key, role, position) into out[0], out[1] (`key_words_torch`)."""
    h0, h1 = L0, L1
    for value in (key, role, position):
        low, high = value & M32, (value >> 32) & M32
        h0 = _absorb(_absorb(h0, low), high)
        h1 = _absorb(_absorb(h1, low), high)
    out[0], out[1] = h0, h1


@_njit
def _token_word(lane0, lane1, token):
    return _absorb(_absorb(lane0, token), lane1)


@_njit
def _load(src, r, i, shift, out):
    """Row (r, i) of raw bits `src` into the uint32 buffer `out` as float32 bits."""
    row = src[r, i]
    for j in range(row.shape[0]):
        out[j] = np.uint32(row[j]) << shift


@_njit
def _value(src, r, i, x, shift, scratch):
    """The float32 value of one raw element."""
    scratch[0] = np.uint32(src[r, i, x]) << shift
    return scratch.view(np.float32)[0]


@_njit
def _halve(x, width):
    """x[:width] summed in place as `block_race._halving_sum` sums a block: halves added
    elementwise until one value is left (x[0])."""
    while width > 1:
        width //= 2
        for j in range(width):
            x[j] = x[j] + x[j + width]


@_njit
def _block_masses(w, vocab, out, scratch):
    """`block_masses_torch` of one float32 row `w` into out [blocks]."""
    full = vocab // BLOCK
    for blk in range(full):
        for j in range(BLOCK):
            scratch[j] = w[blk * BLOCK + j]
        _halve(scratch, BLOCK)
        out[blk] = scratch[0]
    if vocab % BLOCK:
        for j in range(BLOCK):
            scratch[j] = w[full * BLOCK + j] if full * BLOCK + j < vocab else np.float32(0.0)
        _halve(scratch, BLOCK)
        out[full] = scratch[0]


@_njit
def _has_mass(masses):
    """Not `masses.amax() <= 0` (a NaN propagates through amax, so a NaN has mass)."""
    for v in masses:
        if not v <= 0:
            return True
    return False


@_njit
def walk_and_masses(p, q, shift_p, shift_q, has_q, drafts, limits, coins, keys, positions,
                    accept, excluded, flags, masses, lanes, words):
    """Pass 1, per request: the acceptance walk, then the stopping row's weights read once
    (their block masses into `masses`, the residual flag), the draw's key lanes and the
    stream's words of the block keys."""
    b, _, vocab = p.shape
    p_bits = np.empty(vocab, np.uint32)
    q_bits = np.empty(vocab, np.uint32)
    p_row, q_row = p_bits.view(np.float32), q_bits.view(np.float32)
    scratch = np.empty(BLOCK, np.float32)
    one = np.empty(1, np.uint32)
    for r in range(b):
        limit, a = limits[r], 0
        while a < limit:
            x = drafts[r, a]
            if x < 0 or x >= vocab:
                break
            q_x = _value(q, r, a, x, shift_q, one) if has_q else np.float32(1.0)
            if not coins[r, a] * q_x < _value(p, r, a, x, shift_p, one):
                break
            a += 1
        rejected = a < limit
        accept[r] = a
        excluded[r] = drafts[r, a] if rejected and 0 <= drafts[r, a] < vocab else -1
        _load(p, r, a, shift_p, p_bits)
        residual = rejected
        if rejected:
            if has_q:
                _load(q, r, a, shift_q, q_bits)
                for j in range(vocab):
                    d = p_row[j] - q_row[j]
                    q_row[j] = np.float32(0.0) if d < 0 else d  # clamp_min: NaN stays
            else:
                q_row[:] = p_row
                if excluded[r] >= 0:
                    q_row[excluded[r]] = np.float32(0.0)
            _block_masses(q_row, vocab, masses[r], scratch)
            if not _has_mass(masses[r]):  # a residual without mass: the draw is from p
                residual = False
        if not residual:
            _block_masses(p_row, vocab, masses[r], scratch)
        flags[r, 0], flags[r, 1] = rejected, residual
        role = RESIDUAL if rejected else SAMPLE
        _key_lanes(keys[r], role, positions[r] + a, lanes[r])
        for blk in range(masses.shape[1]):
            words[r, blk] = _token_word(lanes[r, 0], lanes[r, 1], BLOCK_BASE + blk)


@_njit
def _first_argmax(weights, noise):
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
    """Pass 2: the winning block of each request and the words of its token ids (clamped
    into the vocabulary, as `block_race.block_columns`)."""
    for r in range(masses.shape[0]):
        block[r] = _first_argmax(masses[r], noise[r])
        for t in range(BLOCK):
            column = min(block[r] * BLOCK + t, vocab - 1)
            token_words[r, t] = _token_word(lanes[r, 0], lanes[r, 1], np.int64(column))


@_njit
def race_tokens(p, q, shift_p, shift_q, has_q, accept, excluded, flags, block, noise, bonus):
    """Pass 3: the winning token within each request's block, its weights read again (0 past
    the vocabulary)."""
    vocab = p.shape[2]
    weights = np.empty(BLOCK, np.float32)
    one = np.empty(1, np.uint32)
    for r in range(accept.shape[0]):
        a = accept[r]
        for t in range(BLOCK):
            column = block[r] * BLOCK + t
            if column >= vocab:
                weights[t] = np.float32(0.0)
                continue
            w = _value(p, r, a, column, shift_p, one)
            if flags[r, 1]:
                if has_q:
                    d = w - _value(q, r, a, column, shift_q, one)
                    w = np.float32(0.0) if d < 0 else d
                elif column == excluded[r]:
                    w = np.float32(0.0)
            weights[t] = w
        bonus[r] = min(block[r] * BLOCK + _first_argmax(weights, noise[r]), vocab - 1)
