"""The per-request filtering rule (temperature, top-k, top-p, min-p) shared by every verifier.

Rule, per request with temperature T > 0, from scores s [V] (raw logits; or, for probability
inputs, s = log p, so that a probability row is treated as softmax of its logarithm):

1. z = s / T (float32; T = 0 is greedy and never reaches the filter). The filters rank keys:
   z for logits; for probability inputs the float32 probabilities p themselves, -inf where
   p = 0 (p^(1/T) orders as p does, while a float32 log maps distinct probabilities onto one
   value, a tie no other sampler sees).
2. top-k (0 < k < V): keep v iff key_v >= the k-th largest key. Ties at the k-th value are all
   kept.
3. top-p (p < 1): keep v iff the mass of the tokens with a key strictly above key_v, within the
   set the filter order names (`orders`: the top-k survivors by default), renormalised, is < p
   (<= p in the `sglang` order). Ties at the boundary are all kept; with distinct values this
   is the smallest most-likely prefix whose mass reaches p.
4. min-p (m > 0): keep v iff its weight w_v >= m, i.e. its probability is at least m times the
   largest one (scale-free, so the same before or after renormalising).
5. Keep what passes 2-4 and renormalise: pi(v) = w_v / Z over the kept tokens, Z their mass.

The weight is w_v = exp(z_v - max z), 0 where z_v - max z <= `EXP_FLOOR` (-87: below
float32's normal range), computed by one exp per backend (torch: `exp_`; Triton: `exp_weight`).
Steps 2-4 keep an upper set of keys, so a row is summarised by three numbers (`RowStats`): the
shift max z, the threshold tau = max(top-k, top-p thresholds) (a key) and the normaliser Z. Any
token's filtered probability is then one scalar formula, and a whole row one elementwise pass:
no filtered [b, n, V] tensor is ever built, and the acceptance test, the residual, the race and
the logprobs all read that formula's float32 numbers (docs/kernels.md, "Exact and rounded
operations"). The argmax is always kept, so pi has mass > 0 whenever the row has a finite score.

The verifiers call the implementations directly (this family has no wrapper of its own), through
the names exported here: the torch path's `gathered_row_stats` (and `row_stats` of rows already
scaled), `filtered_probs_at`, `filtered_log_probs_at`, `filtered_rows`, `scaled_scores`,
`scaled_probabilities`, `filter_keys`; the Triton path's launchers `row_stats_triton`,
`filtered_rows_triton`, `filtered_log_probs_triton` and, where Triton is installed, the device
functions the verify kernels fuse (`row_stats_tiles`, `filtered_tile`).

Family: `types` (`RowStats`), `reference` (per row, by sorting; the test oracle), `torch_impl`
(row chunks, top-k / top-p thresholds on the row's sorted prefix down to a pivot among its
column maxima, `specreg.kernels.pivot`; short rows take a `torch.topk` prefix), `triton_impl`
(jit functions the verifier kernels call per row: thresholds by a pivot search over the float32
order whose bounds jump to the nearest element keys, so exact element values in about 12 passes
instead of a bisection's 32, in tiles with int64 offsets). The filter orders (`specreg`,
`vllm`, `sglang`, each one's rule) are `specreg.contract.filter_order`. Tie rule, every path: a
threshold is an element's value and every element equal to it is kept, as the sorted reference
keeps every tie at a cut.
"""

from __future__ import annotations

from typing import Any

from specreg.kernels.filtering.torch_impl import (
    filter_keys,
    filtered_log_probs_at,
    filtered_probs_at,
    filtered_rows,
    gathered_row_stats,
    row_stats,
    scaled_probabilities,
    scaled_scores,
)
from specreg.kernels.filtering.types import RowStats

#: The Triton path's names, imported from `triton_impl` on first use: importing it imports
#: Triton, which must not load before a test session has switched its interpreter on, and
#: specreg.testing's pytest plugin imports this family (its reference) before that.
_TRITON_NAMES = (
    "filtered_log_probs_triton",
    "filtered_rows_triton",
    "filtered_tile",
    "row_stats_tiles",
    "row_stats_triton",
)

__all__ = [
    "RowStats",
    "filter_keys",
    "filtered_log_probs_at",
    "filtered_probs_at",
    "filtered_rows",
    "gathered_row_stats",
    "row_stats",
    "scaled_probabilities",
    "scaled_scores",
    *_TRITON_NAMES,
]


def __getattr__(name: str) -> Any:
    """The Triton path's names (`_TRITON_NAMES`), from `triton_impl` (the device functions
    exist only where Triton is installed)."""
    if name in _TRITON_NAMES:
        from specreg.kernels.filtering import triton_impl

        return getattr(triton_impl, name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
