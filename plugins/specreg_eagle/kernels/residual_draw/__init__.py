"""`final_tokens`: the final token of tree sampling, drawn from the residual row in two levels.

The rule is the reference's inverse CDF over the residual weights w (p without the tried
tokens for the target-only rule, max(p - a q, 0) with frozen coefficients at the tried tokens
for recursive rejection): the first token with w > 0 whose running sum exceeds
`coin * sum(w)`, or the last positive token when rounding leaves none. It is taken in two
levels: the sums of `DRAW_BLOCK`-token blocks (one pass over the row), the first block whose
running sum (float64) passes the target, then the running sum inside that block. In exact
arithmetic that is the flat inverse CDF; no pass runs a cumulative sum over the whole row, and
a Triton program can draw it from one streamed read (block sums, then one block again).
`reference.two_level_draw_reference` is the per-row oracle; rows without mass fall back to p.
"""

from __future__ import annotations

from specreg_eagle.kernels.residual_draw.torch_impl import DRAW_BLOCK, final_tokens

__all__ = ["DRAW_BLOCK", "final_tokens"]
