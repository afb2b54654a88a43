"""`final_tokens`: the final token of tree sampling, raced from the residual row.

The weights w are the residual at the last accepted node: p without the tried tokens for the
target-only rule, max(p - a q, 0) with frozen coefficients at the tried tokens for recursive
rejection; a row without mass falls back to p. The token is the verifiers' two-level
exponential race on the counter-based random stream (`specreg.kernels.block_race`, its oracle
`specreg.kernels.sampling.reference.block_race_reference`): the block of `RACE_BLOCK` = 128
tokens with the largest mass / E, then the token of that block with the largest w / E, every
E ~ Exp(1) an independent value of the stream keyed by (request key, role, absolute position)
(`specreg.kernels.random_stream`). It is exact (P(token) = w / sum(w)) with one read of the
row, and the same key gives the same token on every backend and in every batch.
`reference.final_token_reference` is the per-row oracle.
"""

from __future__ import annotations

from specreg.kernels.random_stream.types import RACE_BLOCK
from specreg.kernels.tree_residual_draw.torch_impl import final_tokens

__all__ = ["RACE_BLOCK", "final_tokens"]
