"""Independent oracles for the production-shape lossless tests
(`tests/kernels/test_lossless_production_shapes.py`): written from the definitions, importing
nothing from specreg.

- The counter-based stream in NumPy: murmur3's block step and finalizer over 32-bit words held in
  uint64 arrays; a draw's two key lanes each start at fmix32(start) and absorb the six 32-bit
  halves of (request key, role, absolute position); a token's word absorbs the token into lane 0,
  then lane 1; exponential = float32(-log((word + 0.5) * 2**-32)) taken in float64; uniform =
  ((word >> 9) + 0.5) * 2**-23.
- The two-level exponential race: block masses of RACE_BLOCK float32 weights by pairwise halving
  (`x[:h] + x[h:]` in float32), block j keyed by token 2**31 + j, the first argmax of
  mass / E_block in float64, then the first argmax of w / E_token inside the winning block.
- The old race keyed by one float32 coin (lane_i = fmix32(bits(coin) ^ LANE_STARTS[i])), for the
  birthday control.
- The filtered softmax (temperature, top-k, top-p over the top-k survivors, min-p), in float64.
- Rows whose values are dyadic rationals exact in bfloat16 and float32, summing to exactly 1.
- The binned chi-square and the smallest total variation it detects (`detectable_tv`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy import optimize, stats

MASK32 = np.uint64(0xFFFFFFFF)
LANE_STARTS = (0x9E3779B9, 0x85EBCA77)
RACE_BLOCK = 128
BLOCK_KEY_BASE = 1 << 31
SAMPLE, RESIDUAL, ACCEPT = 0, 1, 2


# --- the stream ----------------------------------------------------------------------------


def _u64(x) -> np.ndarray:
    return np.asarray(x, dtype=np.uint64)


def _mul32(a: np.ndarray, c: int) -> np.ndarray:
    return (a * np.uint64(c)) & MASK32  # a < 2**32, c < 2**32: the uint64 product is exact


def _rotl(x: np.ndarray, r: int) -> np.ndarray:
    return ((x << np.uint64(r)) | (x >> np.uint64(32 - r))) & MASK32


def fmix32(h) -> np.ndarray:
    """murmur3's 32-bit finalizer, elementwise."""
    h = _u64(h)
    h = h ^ (h >> np.uint64(16))
    h = _mul32(h, 0x85EBCA6B)
    h = h ^ (h >> np.uint64(13))
    h = _mul32(h, 0xC2B2AE35)
    return h ^ (h >> np.uint64(16))


def absorb(h, word) -> np.ndarray:
    """murmur3's block step of one 32-bit word into the running hash, then the finalizer."""
    k = _mul32(_u64(word) & MASK32, 0xCC9E2D51)
    k = _mul32(_rotl(k, 15), 0x1B873593)
    h = _rotl(_u64(h) ^ k, 13)
    return fmix32((_mul32(h, 5) + np.uint64(0xE6546B64)) & MASK32)


def _halves(value) -> tuple[np.ndarray, np.ndarray]:
    """The low and high 32-bit halves of int64 values (two's complement)."""
    bits = np.asarray(value, dtype=np.int64).view(np.uint64)
    return bits & MASK32, bits >> np.uint64(32)


def key_lanes(keys, role, positions) -> tuple[np.ndarray, np.ndarray]:
    """The two key lanes (uint64 arrays of 32-bit values) of draws (key, role, position),
    broadcast together."""
    keys, role, positions = np.broadcast_arrays(
        np.asarray(keys, dtype=np.int64), np.asarray(role, dtype=np.int64),
        np.asarray(positions, dtype=np.int64),
    )
    words = [*_halves(keys), *_halves(role), *_halves(positions)]
    lanes = []
    for start in LANE_STARTS:
        h = np.broadcast_to(fmix32(start), keys.shape)
        for word in words:
            h = absorb(h, word)
        lanes.append(h)
    return lanes[0], lanes[1]


def token_words(lane0, lane1, tokens) -> np.ndarray:
    """The words of `tokens` (ints in [0, 2**32)) under key lanes that broadcast with them."""
    return absorb(absorb(lane0, _u64(tokens)), lane1)


def uniforms(words) -> np.ndarray:
    """float32 ((word >> 9) + 0.5) * 2**-23 (exact)."""
    top = (_u64(words) >> np.uint64(9)).astype(np.float64)
    return ((top + 0.5) * 2.0**-23).astype(np.float32)


def exponentials(words) -> np.ndarray:
    """float32(-log((word + 0.5) * 2**-32)), the log in float64."""
    return (-np.log((_u64(words).astype(np.float64) + 0.5) * 2.0**-32)).astype(np.float32)


# --- the race ------------------------------------------------------------------------------


def block_masses(weights: np.ndarray) -> np.ndarray:
    """float32 masses of RACE_BLOCK-token blocks of float32 `weights` [V]: zero padding, then
    halves added elementwise in float32 until one value is left."""
    w = np.asarray(weights, dtype=np.float32)
    blocks = -(-w.shape[0] // RACE_BLOCK)
    x = np.zeros(blocks * RACE_BLOCK, dtype=np.float32)
    x[: w.shape[0]] = w
    x = x.reshape(blocks, RACE_BLOCK)
    while x.shape[1] > 1:
        half = x.shape[1] // 2
        x = (x[:, :half] + x[:, half:]).astype(np.float32)
    return x[:, 0]


def block_race(weights: np.ndarray, lane0, lane1) -> int:
    """The two-level exponential race over float32 `weights` [V] under one draw's key lanes."""
    w = np.asarray(weights, dtype=np.float32)
    masses = block_masses(w)
    block_keys = BLOCK_KEY_BASE + np.arange(masses.shape[0], dtype=np.uint64)
    e_block = exponentials(token_words(lane0, lane1, block_keys)).astype(np.float64)
    block = int(np.argmax(masses.astype(np.float64) / e_block))
    tokens = np.arange(block * RACE_BLOCK, min((block + 1) * RACE_BLOCK, w.shape[0]))
    e_token = exponentials(token_words(lane0, lane1, tokens)).astype(np.float64)
    return int(tokens[np.argmax(w[tokens].astype(np.float64) / e_token)])


def coin_lanes(coins: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The key lanes of the old race keyed by one float32 coin per request: lane i =
    fmix32(bits(coin) ^ LANE_STARTS[i])."""
    bits = np.asarray(coins, dtype=np.float32).view(np.uint32).astype(np.uint64)
    return fmix32(bits ^ np.uint64(LANE_STARTS[0])), fmix32(bits ^ np.uint64(LANE_STARTS[1]))


def colliding_pairs(lane0: np.ndarray, lane1: np.ndarray) -> int:
    """Pairs of draws whose two key lanes are both equal."""
    joined = (np.asarray(lane0, dtype=np.uint64) << np.uint64(32)) | np.asarray(
        lane1, dtype=np.uint64
    )
    _, counts = np.unique(joined, return_counts=True)
    return int((counts * (counts - 1) // 2).sum())


# --- filtering -----------------------------------------------------------------------------


def filtered_softmax(
    scores: np.ndarray, temperature: float, *, top_k: int = 0, top_p: float = 1.0,
    min_p: float = 0.0,
) -> np.ndarray:
    """float64 filtered softmax of one row of logits, from the rule's definition: z = s / T in
    float32; top-k keeps z >= the k-th largest z (0 < k < V; ties kept); top-p keeps v when the
    mass of the top-k survivors with z strictly above z_v, over their total, is < top_p; min-p
    keeps exp(z - max z) >= min_p; the kept weights exp(z - max z) renormalised."""
    z32 = np.asarray(scores, dtype=np.float32) / np.float32(temperature)
    z = z32.astype(np.float64)
    vocab = z.shape[0]
    keep = np.ones(vocab, dtype=bool)
    if 0 < top_k < vocab:
        keep &= z >= np.sort(z)[::-1][top_k - 1]
    weight = np.exp(z - z.max())
    if top_p < 1:
        base = np.where(keep, weight, 0.0)
        levels, inverse = np.unique(-z, return_inverse=True)  # ascending -z: descending z
        level_mass = np.bincount(inverse, weights=base, minlength=levels.shape[0])
        above = np.cumsum(level_mass) - level_mass
        keep &= (above / base.sum() < top_p)[inverse]
    if min_p > 0:
        keep &= weight >= min_p
    kept = np.where(keep, weight, 0.0)
    return kept / kept.sum()


# --- rows ----------------------------------------------------------------------------------


def bf16_exact(values: np.ndarray) -> bool:
    """Whether every value has at most 8 significant bits (exact in bfloat16) and a normal
    exponent (zero allowed)."""
    v = np.asarray(values, dtype=np.float64)
    nz = v[v != 0]
    mantissa, _ = np.frexp(nz)
    return bool(np.all(mantissa * 256 == np.round(mantissa * 256)) and np.all(nz > 2.0**-120))


def _round_bits(value: float, bits: int = 8) -> float:
    """`value` rounded down to `bits` significant bits."""
    mantissa, exponent = math.frexp(value)
    return math.floor(mantissa * 2**bits) / 2**bits * 2.0**exponent


@dataclass(frozen=True)
class DyadicRows:
    """A target row p and a draft row q over V tokens, dyadic values exact in bfloat16, each
    summing to exactly 1. `heads`: the peaked tokens (each in its own race block); `decoy`: a
    token with p = 0 < q (its drafts are always rejected); `zeros`: tokens with p = 0."""

    p: np.ndarray
    q: np.ndarray
    heads: np.ndarray
    decoy: int
    zeros: np.ndarray


#: Head shares of the target's peaked mass and the draft's over / under weights of them.
_P_HEADS = (0.35, 0.26, 0.22, 0.17)
_Q_HEAD_SHIFT = (+0.10, -0.06, -0.09, -0.12)
SPECIALS = 128  # heads, the decoy and the zero tokens


def special_tokens(vocab: int) -> np.ndarray:
    """SPECIALS token ids, one in each of SPECIALS equal spans of the vocab, at varying offsets
    inside their race blocks (so the heads fall in different blocks)."""
    span = vocab // SPECIALS
    return np.array([s * span + (s * 37 + 5) % min(span, RACE_BLOCK) for s in range(SPECIALS)])


def _fill_exact(values: np.ndarray, tail: np.ndarray, unit: float) -> None:
    """Add one `unit` to tail tokens (spread evenly) until `values` sums to exactly 1."""
    missing = round((1.0 - math.fsum(values)) / unit)
    assert 0 <= missing <= tail.shape[0], missing
    picks = tail[np.linspace(0, tail.shape[0] - 1, missing).astype(np.int64)] if missing else []
    values[picks] += unit


def dyadic_rows(vocab: int) -> DyadicRows:
    """Rows with a peaked head and a flat tail (module docstring of the test file).

    p: the tail (every non-special token) holds t = 2**-e each (about 0.25-0.3 of the mass),
    four heads in different blocks hold the rest; q: the tail holds t / 4 on three blocks of four
    and 2t on the fourth, the decoy 1/4, the heads the rest, one over-weighted and three
    under-weighted. The residual max(p - q, 0) then spans three blocks in four (about half its
    mass) plus three heads, and about 4 drafts in 10 are rejected. Values are multiples of
    t / 8 with at most 8 significant bits (exact in bfloat16 and float32, every float32 block sum
    exact); each row sums to exactly 1 (a few tail tokens carry one unit t / 8 more)."""
    specials = special_tokens(vocab)
    heads, decoy, zeros = specials[[3, 40, 77, 114]], int(specials[60]), np.delete(
        specials, [3, 40, 77, 114, 60]
    )
    tail = np.setdiff1d(np.arange(vocab), specials)
    exponent = round(math.log2(tail.shape[0] / 0.28))
    t = 2.0**-exponent
    unit = t / 8
    p = np.zeros(vocab)
    p[tail] = t
    head_mass = 1.0 - math.fsum(p)
    p[heads] = [_round_bits(share * head_mass) for share in _P_HEADS]
    _fill_exact(p, tail, unit)
    q = np.zeros(vocab)
    fourth = (tail // RACE_BLOCK) % 4 == 3
    q[tail[~fourth]] = t / 4
    q[tail[fourth]] = 2 * t
    q[decoy] = 0.25
    q_head_mass = 1.0 - math.fsum(q)
    shares = np.array(_P_HEADS) * head_mass + np.array(_Q_HEAD_SHIFT)
    shares *= q_head_mass / shares.sum()
    q[heads] = [_round_bits(s) for s in shares]
    _fill_exact(q, tail[~fourth], unit)
    for row in (p, q):
        assert math.fsum(row) == 1.0 and bf16_exact(row)
    return DyadicRows(p=p, q=q, heads=heads, decoy=decoy, zeros=zeros)


# --- statistics ----------------------------------------------------------------------------

#: Significance level of every chi-square test here, and the power the stated TVs are for.
ALPHA = 1e-4
POWER = 0.99


def detectable_tv(n: int, bins: int, *, alpha: float = ALPHA, power: float = POWER) -> float:
    """The smallest binned total variation eps that a Pearson chi-square on `bins` bins with `n`
    draws rejects with probability >= `power` at level `alpha`.

    With p the expected binned law and pi the sampler's, d = pi - p, eps = sum|d| / 2, the
    statistic is (asymptotically) noncentral chi-square with bins - 1 degrees of freedom and
    noncentrality lambda = n * sum(d_i**2 / p_i). By Cauchy-Schwarz,
    (sum |d_i|)**2 <= sum(d_i**2 / p_i) * sum(p_i), so lambda >= 4 n eps**2, with equality for
    the worst placement (|d_i| proportional to p_i, + on half the mass, - on the other half).
    The power grows with lambda, so power(4 n eps**2) bounds it for every pi at TV eps; eps
    solves power(4 n eps**2) = `power`."""
    df = bins - 1
    critical = stats.chi2.isf(alpha, df)
    lam = optimize.brentq(lambda x: stats.ncx2.sf(critical, df, x) - power, 1e-9, 1e6)
    return math.sqrt(lam / (4 * n))


def chi_square_pvalue(counts: np.ndarray, probs: np.ndarray) -> float:
    """Pearson chi-square p-value of `counts` against the law `probs` (bins - 1 dof)."""
    counts = np.asarray(counts, dtype=np.float64)
    expected = counts.sum() * np.asarray(probs, dtype=np.float64)
    statistic = float(((counts - expected) ** 2 / expected).sum())
    return float(stats.chi2.sf(statistic, counts.shape[0] - 1))


@dataclass(frozen=True)
class Binning:
    """Token -> bin of a law over V tokens: each head its own bin, the other tokens of positive
    mass in `tail_bins` bins of (nearly) equal expected mass, -1 for tokens of zero mass."""

    of_token: np.ndarray  # int64 [V]
    probs: np.ndarray  # float64 [bins]
    heads: np.ndarray

    @property
    def bins(self) -> int:
        return self.probs.shape[0]

    def counts(self, tokens: np.ndarray) -> tuple[np.ndarray, int]:
        """(counts per bin, number of tokens of zero expected mass)."""
        found = self.of_token[np.asarray(tokens, dtype=np.int64)]
        return np.bincount(found[found >= 0], minlength=self.bins), int((found < 0).sum())

    def tail_mass(self) -> float:
        return float(self.probs[self.heads.shape[0]:].sum())


def binning(law: np.ndarray, heads: np.ndarray, tail_bins: int) -> Binning:
    """Bins of `law` (float64 [V], sums to 1): heads first, then the tail ordered by (lower /
    upper half of its race block, token id) and cut into `tail_bins` runs of equal mass, so a
    bin sees both where in the vocab and where inside a block the tail's draws land."""
    law = np.asarray(law, dtype=np.float64)
    of_token = np.full(law.shape[0], -1, dtype=np.int64)
    of_token[heads] = np.arange(heads.shape[0])
    tail = np.setdiff1d(np.nonzero(law > 0)[0], heads)
    upper = (tail % RACE_BLOCK) >= RACE_BLOCK // 2
    tail = np.concatenate([tail[~upper], tail[upper]])
    running = np.cumsum(law[tail])
    cut = np.minimum((running / running[-1] * tail_bins - 1e-9).astype(np.int64), tail_bins - 1)
    of_token[tail] = heads.shape[0] + cut
    probs = np.bincount(of_token[of_token >= 0], weights=law[of_token >= 0],
                        minlength=heads.shape[0] + tail_bins)
    return Binning(of_token=of_token, probs=probs, heads=heads)


def with_defect(
    tokens: np.ndarray, bins: Binning, law: np.ndarray, eps: float, rng: np.random.Generator
) -> np.ndarray:
    """A sampler with a systematic error of binned TV `eps`: `tokens` with each tail draw
    replaced, with probability eps / (tail mass), by a draw from `law` restricted to the heads.
    Its law is p + eps * (p_heads / P_heads - p_tail / P_tail): eps of mass moved from every
    tail bin in proportion to every head in proportion, the shape of the worst placement of
    `detectable_tv` (noncentrality n eps**2 (1 / P_heads + 1 / P_tail), 4 n eps**2 when the
    heads hold half the mass)."""
    tokens = np.array(tokens, dtype=np.int64)
    heads = bins.heads
    in_tail = bins.of_token[tokens] >= heads.shape[0]
    swap = np.nonzero(in_tail & (rng.random(tokens.shape[0]) < eps / bins.tail_mass()))[0]
    head_law = law[heads] / law[heads].sum()
    tokens[swap] = rng.choice(heads, size=swap.shape[0], p=head_law)
    return tokens


def draws(law: np.ndarray, size, rng: np.random.Generator) -> np.ndarray:
    """Tokens drawn from `law` (float64, sums to 1) by inverse CDF in float64."""
    cdf = np.cumsum(law)
    tokens = np.searchsorted(cdf, rng.random(size) * cdf[-1], side="right")
    return np.minimum(tokens, law.shape[0] - 1)


def draws_without_replacement(law: np.ndarray, size: int, k: int,
                              rng: np.random.Generator) -> np.ndarray:
    """[size, k] distinct tokens per row, drawn one after another from `law` renormalised over
    the tokens not drawn yet (sequential sampling without replacement), by redrawing a row's
    token from `law` until it is new: the accepted redraw is `law` conditioned on the new tokens,
    which is that renormalised law."""
    out = np.empty((size, k), dtype=np.int64)
    for slot in range(k):
        pending = np.arange(size)
        while pending.shape[0]:
            out[pending, slot] = draws(law, pending.shape[0], rng)
            repeated = (out[pending, :slot] == out[pending, slot : slot + 1]).any(axis=1)
            pending = pending[repeated]
    return out


#: Tail bins of the lossless tests (B = heads + TAIL_BINS bins) and the injected error of their
#: control, as a multiple of the stated eps.
TAIL_BINS = 6
CONTROL_FACTOR = 1.1


def check_lossless(tokens: np.ndarray, law: np.ndarray, heads: np.ndarray, stated_eps: float,
                   seed: int) -> None:
    """The binned chi-square of `tokens` against `law` must not reject at ALPHA; the test's
    power claim (`detectable_tv` <= `stated_eps`); no token of zero mass; and the control: the
    same tokens with an error of binned TV CONTROL_FACTOR x `stated_eps` injected
    (`with_defect`) must be rejected."""
    bins = binning(law, heads, TAIL_BINS)
    counts, impossible = bins.counts(tokens)
    assert impossible == 0, "a token of zero probability was emitted"
    assert detectable_tv(tokens.shape[0], bins.bins) <= stated_eps
    assert chi_square_pvalue(counts, bins.probs) >= ALPHA
    rng = np.random.default_rng(seed)
    faulty = with_defect(tokens, bins, law, CONTROL_FACTOR * stated_eps, rng)
    assert chi_square_pvalue(bins.counts(faulty)[0], bins.probs) < ALPHA


@dataclass(frozen=True)
class LevelLogits:
    """Target and draft logit rows for the sampling-parameter tests: four heads in different
    blocks, then levels of tied logits over tokens spread across the vocab, then a floor.
    `levels[i]` holds the ids of the target's level i; the draft moves half of level 0 down to
    the floor and lifts `decoys` (floor tokens of the target) to level 0, and weights the heads
    differently. Every value is a multiple of 1/8, exact in bfloat16."""

    target: np.ndarray
    draft: np.ndarray
    heads: np.ndarray
    levels: tuple[np.ndarray, ...]
    decoys: np.ndarray


def level_logits(
    vocab: int, heads: tuple[float, ...], levels: tuple[tuple[int, float], ...], floor: float,
    draft_heads: tuple[float, ...], seed: int = 0,
) -> LevelLogits:
    specials = special_tokens(vocab)
    head_ids = specials[[3, 40, 77, 114]]
    others = np.random.default_rng(seed).permutation(np.setdiff1d(np.arange(vocab), head_ids))
    target = np.full(vocab, floor)
    target[head_ids] = heads
    sets, start = [], 0
    for count, logit in levels:
        ids = np.sort(others[start : start + count])
        target[ids] = logit
        sets.append(ids)
        start += count
    decoys = np.sort(others[start : start + levels[0][0] // 2])
    draft = target.copy()
    draft[head_ids] = draft_heads
    draft[sets[0][::2]] = floor
    draft[decoys] = levels[0][1]
    for row in (target, draft):
        assert bf16_exact(row)
    return LevelLogits(target=target, draft=draft, heads=head_ids, levels=tuple(sets),
                       decoys=decoys)


# --- the chain rule, request by request ----------------------------------------------------


def chain_reference(
    p: np.ndarray, q: np.ndarray | None, candidates: np.ndarray, keys: np.ndarray,
    positions: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """(accept_len [b], output tokens [b, n]) of chain sampling from the definitions: draft x of
    row i (absolute position positions[r] + i) is accepted iff float32(u * q(x)) < p(x) (q(x) = 1
    without a draft), u the uniform of (key, ACCEPT, position, x); at the first rejection the
    token is the race over max(p - q, 0) (p without x without a draft; p if that has no mass)
    in the RESIDUAL role at that row's position; after every draft the race over p of the last
    row in the SAMPLE role. `p` float32 [b, n, V], `q` float32 [b, n - 1, V] or None."""
    b, n, _ = p.shape
    accept_len = np.zeros(b, dtype=np.int64)
    output = np.full((b, n), -1, dtype=np.int64)
    for r in range(b):
        stop = 0
        while stop < n - 1:
            x = int(candidates[r, stop + 1])
            u = uniforms(token_words(*key_lanes(keys[r], ACCEPT, positions[r] + stop), x))
            qx = np.float32(1.0) if q is None else q[r, stop, x]
            if not np.float32(np.float64(u) * np.float64(qx)) < p[r, stop, x]:
                break
            output[r, stop] = x
            stop += 1
        if stop < n - 1:
            if q is None:
                weights = p[r, stop].copy()
                weights[int(candidates[r, stop + 1])] = 0
            else:
                weights = np.maximum(p[r, stop] - q[r, stop], np.float32(0))
            if not weights.max() > 0:
                weights = p[r, stop]
            role = RESIDUAL
        else:
            weights, role = p[r, stop], SAMPLE
        output[r, stop] = block_race(weights, *key_lanes(keys[r], role, positions[r] + stop))
        accept_len[r] = stop
    return accept_len, output
