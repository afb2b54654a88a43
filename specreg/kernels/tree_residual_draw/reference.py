"""The per-row final draw (test oracle), in Python floats: the two-level race on the stream."""

from __future__ import annotations

from specreg.kernels.sampling.reference import block_race_reference


def final_token_reference(
    weights: list[float], p_row: list[float], lanes: tuple[int, int]
) -> int:
    """The token `block_race_reference` draws from `weights` under the key `lanes`; from
    `p_row` (same lanes) when the weights have no mass."""
    return block_race_reference(weights if any(w > 0 for w in weights) else p_row, lanes)
