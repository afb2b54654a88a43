"""An independent re-implementation of the chain verifiers' random draws, for known answers.

Written from the documented definitions (`specreg.kernels.random_stream` and the chain family's
module docstrings), in NumPy and plain Python, importing nothing from specreg: the tests check
specreg's tokens against it, so a known answer is never computed by the code under test.

The stream (murmur3 over 32-bit words):

- `absorb(h, w)`: murmur3's block step (k = w * c1, k = rotl(k, 15) * c2, h = rotl(h ^ k, 13),
  h = h * 5 + 0xE6546B64), then murmur3's 32-bit finalizer `fmix32`.
- key lanes of (seed, request, position): each lane starts at fmix32(start) (starts 0x9E3779B9
  and 0x85EBCA77) and absorbs the low then high 32-bit halves of seed, request, position.
  A verifier's draw keys (seed, request, position) = (request key, role, absolute position);
  roles SAMPLE 0 (the bonus), RESIDUAL 1 (the correction), ACCEPT 2 (acceptance uniforms).
- token word: absorb(absorb(lane0, token), lane1).
- uniform: ((word >> 9) + 0.5) * 2**-23; exponential: float32(-log((word + 0.5) * 2**-32)).

The two-level race over weights w [V] (float32): block masses of 128-token blocks (zero padded,
halves added elementwise in float32 until one value is left); the block j of largest
mass / E(2**31 + j) wins (first on ties, scores in float64), then the token t of that block of
largest w[t] / E(t).
"""

from __future__ import annotations

import math

import numpy as np

MASK32 = 0xFFFFFFFF
LANES = (0x9E3779B9, 0x85EBCA77)
SAMPLE, RESIDUAL, ACCEPT = 0, 1, 2
BLOCK = 128
BLOCK_KEY = 1 << 31


def _rotl(x: int, r: int) -> int:
    return ((x << r) | (x >> (32 - r))) & MASK32


def fmix32(h: int) -> int:
    h ^= h >> 16
    h = (h * 0x85EBCA6B) & MASK32
    h ^= h >> 13
    h = (h * 0xC2B2AE35) & MASK32
    return h ^ (h >> 16)


def absorb(h: int, word: int) -> int:
    k = (word * 0xCC9E2D51) & MASK32
    k = (_rotl(k, 15) * 0x1B873593) & MASK32
    h = _rotl(h ^ k, 13)
    return fmix32((h * 5 + 0xE6546B64) & MASK32)


def lanes(key: int, role: int, position: int) -> tuple[int, int]:
    """The two key lanes of the draws of (request key, role, absolute position)."""
    words = []
    for value in (key, role, position):
        value &= (1 << 64) - 1
        words += [value & MASK32, value >> 32]
    out = []
    for start in LANES:
        h = fmix32(start)
        for word in words:
            h = absorb(h, word)
        out.append(h)
    return out[0], out[1]


def word(key_lanes: tuple[int, int], token: int) -> int:
    return absorb(absorb(key_lanes[0], token & MASK32), key_lanes[1])


def uniform(w: int) -> float:
    return ((w >> 9) + 0.5) * 2.0**-23


def exponential(w: int) -> float:
    return float(np.float32(-math.log((w + 0.5) * 2.0**-32)))


def accept_uniform(key: int, position: int, token: int) -> float:
    """The acceptance uniform of draft `token` at absolute `position` under request `key`."""
    return uniform(word(lanes(key, ACCEPT, position), token))


def block_masses(weights: np.ndarray) -> np.ndarray:
    w = np.asarray(weights, dtype=np.float32)
    blocks = -(-w.size // BLOCK)
    padded = np.zeros(blocks * BLOCK, dtype=np.float32)
    padded[: w.size] = w
    x = padded.reshape(blocks, BLOCK)
    while x.shape[1] > 1:
        half = x.shape[1] // 2
        x = (x[:, :half] + x[:, half:]).astype(np.float32)
    return x[:, 0]


def _first_argmax(scores: list[float]) -> int:
    best = 0
    for i, s in enumerate(scores):
        if s > scores[best]:
            best = i
    return best


def race(weights, key: int, role: int, position: int) -> int:
    """The token the two-level race draws from `weights` under (key, role, position)."""
    w = np.asarray(weights, dtype=np.float32)
    key_lanes = lanes(key, role, position)
    masses = block_masses(w)
    block = _first_argmax(
        [float(m) / exponential(word(key_lanes, BLOCK_KEY + j)) for j, m in enumerate(masses)]
    )
    tokens = list(range(block * BLOCK, min((block + 1) * BLOCK, w.size)))
    return tokens[
        _first_argmax([float(w[t]) / exponential(word(key_lanes, t)) for t in tokens])
    ]


def correction_weights(p_row, q_row, excluded: int) -> np.ndarray:
    """max(p - q, 0) in float32 (or p without `excluded` when q_row is None); p when empty."""
    p = np.asarray(p_row, dtype=np.float32)
    if q_row is not None:
        w = np.maximum((p - np.asarray(q_row, dtype=np.float32)).astype(np.float32), 0)
    else:
        w = p.copy()
        if 0 <= excluded < w.size:
            w[excluded] = 0
    return w if bool((w > 0).any()) else p


def chain(candidates, p, q, key: int, position: int = 0, limit: int | None = None,
          coins=None) -> tuple[int, int]:
    """One request's (accept_len, emitted token) under classic chain rejection sampling
    (target-only when q is None): candidates [n] (anchor then drafts), p [n, V], q [n-1, V].
    The acceptance uniform of draft x at row i is `accept_uniform(key, position + i, x)`
    unless `coins` [n-1] is given; accept iff float32(u * q(x)) < p(x) (q(x) = 1 target-only)."""
    p = np.asarray(p, dtype=np.float32)
    n, vocab = p.shape
    limit = n - 1 if limit is None else limit - 1
    drafts = [int(t) for t in candidates[1:]]
    accept = 0
    while accept < limit:
        x = drafts[accept]
        if not 0 <= x < vocab:
            break
        u = accept_uniform(key, position + accept, x) if coins is None else coins[accept]
        qx = np.float32(1.0) if q is None else np.float32(q[accept][x])
        if not np.float32(np.float32(u) * qx) < p[accept, x]:
            break
        accept += 1
    if accept < limit:
        q_row = None if q is None else q[accept]
        weights = correction_weights(p[accept], q_row, drafts[accept])
        return accept, race(weights, key, RESIDUAL, position + accept)
    return accept, race(p[accept], key, SAMPLE, position + accept)
