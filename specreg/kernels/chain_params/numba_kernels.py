"""The compiled passes of the params chain's CPU draw (numba `njit`, cached on disk, no fastmath).

Imported only by `numba_impl`, and only when numba is installed (this module imports it). Why
their values have the torch path's bits is in `numba_impl`'s docstring: every operation here is
an IEEE float32 division, subtraction or comparison, or a halving sum in the torch path's order;
the exp and the race stay torch's. The raw reads and the halving sum are the shared
`race_numba`'s.
"""

from __future__ import annotations

import numba
import numpy as np

from specreg.kernels.race_numba import as_float32, halve
from specreg.kernels.random_stream.types import RACE_BLOCK

BLOCK = RACE_BLOCK
NEG_INF = np.float32(-np.inf)
#: numpy's error model: a division by a zero mass gives inf or NaN, as torch's does, not an
#: exception.
_njit = numba.njit(cache=True, nogil=True, error_model="numpy")


@_njit
def centred_scores(raw, shift_bits, rows, temperature, shift, threshold, out):
    """Pass A, per chunk row r (flat row `rows[r]` of the raw scores): out[r, j] = z - shift[r]
    with z = s / T (float32, the torch path's `torch.div` then `sub_`), or -inf where z lies
    below the filter threshold (a dropped token: its exp_ is then 0, as the torch path's
    masked_fill makes it; a NaN z is never dropped)."""
    vocab = raw.shape[1]
    for r in range(rows.shape[0]):
        row, t, c, cut = rows[r], temperature[r], shift[r], threshold[r]
        for j in range(vocab):
            z = np.float32(as_float32(raw[row, j], shift_bits) / t)
            out[r, j] = NEG_INF if z < cut else np.float32(z - c)


@_njit
def _normalise(w, min_p, norm):
    """The torch path's min-p fill, then its division by the kept mass."""
    w = np.float32(0.0) if w < min_p else w
    return np.float32(w / norm)


@_njit
def draw_weights(p, q, has_q, min_p, norm_p, norm_q, hit, excluded, masses):
    """Pass B, per chunk row r: p (and q) = exp weights (in `p`, `q`, after torch's exp_) with
    the min-p fill and the division by the kept mass; the draw's weights written back into
    p[r]: max(p - q, 0) (clamp keeps a NaN), or p without the `excluded` token in the
    target-only rule, when `hit` and that residual's amax (NaN propagating) is > 0, else p.
    Then their block masses in `block_masses_torch`'s order (zero padding, halves added
    elementwise)."""
    k, vocab = p.shape
    h = BLOCK // 2
    half = np.empty(h, np.float32)
    for r in range(k):
        top, nan = NEG_INF, False
        token = excluded[r]
        for j in range(vocab):
            w = _normalise(p[r, j], min_p[r], norm_p[r])
            p[r, j] = w
            if has_q:
                d = np.float32(w - _normalise(q[r, j], min_p[r], norm_q[r]))
                d = np.float32(0.0) if d < 0 else d
                q[r, j] = d
            else:
                d = np.float32(0.0) if j == token else w
            if d != d:
                nan = True
            elif d > top:
                top = d
        if hit[r] and not nan and top > 0:
            if has_q:
                for j in range(vocab):
                    p[r, j] = q[r, j]
            else:
                p[r, token] = np.float32(0.0)
        for blk in range(masses.shape[1]):
            base = blk * BLOCK
            for j in range(h):
                a = p[r, base + j] if base + j < vocab else np.float32(0.0)
                b = p[r, base + h + j] if base + h + j < vocab else np.float32(0.0)
                half[j] = a + b
            masses[r, blk] = halve(half)

