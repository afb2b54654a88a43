"""The compiled passes of chain sampling's CPU path (numba `njit`, cached on disk, no fastmath).

Imported only by `numba_impl`, and only when numba is installed (`specreg.kernels.race_numba`,
the stream's words and the race compiled, imports it). The passes and why their values have the
torch path's bits are in `numba_impl`'s docstring; pass 2 is `race_numba.race_blocks`.
"""

from __future__ import annotations

import numpy as np

from specreg.kernels.chain.checks import SAFE_SUM_BITS
from specreg.kernels.race_numba import BLOCK, BLOCK_BASE, RESIDUAL, SAMPLE, race_blocks
from specreg.kernels.race_numba import as_float32 as _as_float32
from specreg.kernels.race_numba import first_argmax as _first_argmax
from specreg.kernels.race_numba import halve as _halve
from specreg.kernels.race_numba import key_lanes as _key_lanes
from specreg.kernels.race_numba import njit as _njit
from specreg.kernels.race_numba import raw_value as _value
from specreg.kernels.race_numba import token_word as _token_word

__all__ = ["race_blocks", "race_tokens", "walk_and_masses"]

#: The bound of the values a read row may hold for its float32 sum to be finite (checks.py's
#: SAFE_SUM_BITS, the bits of 2**103).
BIG = np.float32(2.0**103)
SAFE_BITS = np.uint32(SAFE_SUM_BITS)


@_njit
def _row_masses(p_row, q_row, shift_p, shift_q, mode, excluded, out, half):
    """`block_masses_torch` of the weights a request draws from (raw rows `p_row`, `q_row`):
    p (mode 0), max(p - q, 0) (mode 1; clamp_min keeps a NaN), p without the `excluded` token
    (mode 2), zeros past the row's end. The first level of each block's halving sum is taken
    as the weights are read (w[j] + w[j + BLOCK // 2] into `half`), then `_halve`. Returns how
    many blocks read (p, and q in mode 1) hold a value whose float32 bits, read as unsigned,
    are at or above those of 2**103 (a sign bit, -0.0 included, NaN, inf, or a value at or
    above 2**103; the largest raw word of a full block tells, an integer max taken as it is
    read), or values of the partial block outside [0, 2**103): rows without any have values
    >= 0 with a finite float32 sum, as the read checks require."""
    vocab, h = p_row.shape[0], BLOCK // 2
    outside = 0
    for blk in range(out.shape[0]):
        base = blk * BLOCK
        if base + BLOCK <= vocab and mode == 0:
            top = p_row[base]
            for j in range(h):
                p0, p1 = p_row[base + j], p_row[base + h + j]
                top = max(top, max(p0, p1))
                half[j] = _as_float32(p0, shift_p) + _as_float32(p1, shift_p)
            outside += np.int64((np.uint32(top) << shift_p) >= SAFE_BITS)
        elif base + BLOCK <= vocab and mode == 1:
            top_p, top_q = p_row[base], q_row[base]
            for j in range(h):
                p0, p1 = p_row[base + j], p_row[base + h + j]
                q0, q1 = q_row[base + j], q_row[base + h + j]
                top_p = max(top_p, max(p0, p1))
                top_q = max(top_q, max(q0, q1))
                d0 = _as_float32(p0, shift_p) - _as_float32(q0, shift_q)
                d1 = _as_float32(p1, shift_p) - _as_float32(q1, shift_q)
                half[j] = (np.float32(0.0) if d0 < 0 else d0) + (np.float32(0.0) if d1 < 0 else d1)
            outside += np.int64((np.uint32(top_p) << shift_p) >= SAFE_BITS)
            outside += np.int64((np.uint32(top_q) << shift_q) >= SAFE_BITS)
        else:  # the last, partial block, or the excluded token's rule
            for j in range(h):
                pair = np.float32(0.0)
                for k in (base + j, base + h + j):
                    w = np.float32(0.0)
                    if k < vocab:
                        w = _as_float32(p_row[k], shift_p)
                        outside += _outside(w)
                        if mode == 1:
                            q_k = _as_float32(q_row[k], shift_q)
                            outside += _outside(q_k)
                            w = w - q_k
                            w = np.float32(0.0) if w < 0 else w
                        elif mode == 2 and k == excluded:
                            w = np.float32(0.0)
                    pair = w if k == base + j else pair + w
                half[j] = pair
        out[blk] = _halve(half)
    return outside


@_njit
def _outside(value):
    """1 when `value` lies outside [0, 2**103) (NaN, inf and negatives included; -0.0 is in),
    else 0."""
    return np.int64(1) - np.int64((value >= 0) & (value < BIG))


@_njit
def _has_mass(masses):
    """Not `masses.amax() <= 0` (a NaN propagates through amax, so a NaN has mass)."""
    for v in masses:
        if not v <= 0:
            return True
    return False


@_njit
def walk_and_masses(p, q, shift_p, shift_q, has_q, check, drafts, limits, coins, keys,
                    positions, accept, excluded, flags, masses, lanes, words):
    """Pass 1, per request: the acceptance walk, then the stopping row's weights read once
    (their block masses into `masses`, the residual flag), the draw's key lanes and the
    stream's words of the block keys. flags[r, 2] marks a request whose values fail the read
    checks' quick test (`numba_impl`): a drafted p(x) or q(x) of a verified position outside
    [0, inf) or a q(x) of 0, a value of a row read outside [0, 2**103), or weights without
    mass."""
    b, _, vocab = p.shape
    half = np.empty(BLOCK // 2, np.float32)
    for r in range(b):
        limit, a = limits[r], 0
        while a < limit:
            x = drafts[r, a]
            if x < 0 or x >= vocab:
                break
            q_x = _value(q, r, a, x, shift_q) if has_q else np.float32(1.0)
            if not coins[r, a] * q_x < _value(p, r, a, x, shift_p):
                break
            a += 1
        rejected = a < limit
        accept[r] = a
        suspect = 0
        for i in range(limit if check else 0):  # the drafted values the read checks look at
            x = drafts[r, i]
            if 0 <= x < vocab:
                p_x = _value(p, r, i, x, shift_p)
                suspect += not (p_x >= 0 and p_x < np.inf)
                if has_q:
                    q_x = _value(q, r, i, x, shift_q)
                    suspect += not (q_x > 0 and q_x < np.inf)
        excluded[r] = drafts[r, a] if rejected and 0 <= drafts[r, a] < vocab else -1
        residual = rejected
        if rejected:
            # q stands for p (never read) in the target-only rule
            suspect += _row_masses(p[r, a], q[r, a], shift_p, shift_q, 1 if has_q else 2,
                                   excluded[r], masses[r], half)
            residual = _has_mass(masses[r])  # a residual without mass: the draw is from p
        if not residual:
            suspect += _row_masses(p[r, a], p[r, a], shift_p, shift_p, 0, -1, masses[r], half)
            suspect += not _has_mass(masses[r])
        flags[r, 0], flags[r, 1], flags[r, 2] = rejected, residual, suspect > 0
        role = RESIDUAL if rejected else SAMPLE
        _key_lanes(keys[r], role, positions[r] + a, lanes[r])
        for blk in range(masses.shape[1]):
            words[r, blk] = _token_word(lanes[r, 0], lanes[r, 1], BLOCK_BASE + blk)


@_njit
def race_tokens(p, q, shift_p, shift_q, has_q, accept, excluded, flags, block, noise, bonus):
    """Pass 3: the winning token within each request's block, its weights read again (0 past
    the vocabulary)."""
    vocab = p.shape[2]
    weights = np.empty(BLOCK, np.float32)
    for r in range(accept.shape[0]):
        a = accept[r]
        for t in range(BLOCK):
            column = block[r] * BLOCK + t
            if column >= vocab:
                weights[t] = np.float32(0.0)
                continue
            w = _value(p, r, a, column, shift_p)
            if flags[r, 1]:
                if has_q:
                    d = w - _value(q, r, a, column, shift_q)
                    w = np.float32(0.0) if d < 0 else d
                elif column == excluded[r]:
                    w = np.float32(0.0)
            weights[t] = w
        bonus[r] = min(block[r] * BLOCK + _first_argmax(weights, noise[r]), vocab - 1)
