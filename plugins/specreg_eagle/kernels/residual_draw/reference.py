"""The plain per-row two-level inverse-CDF draw (test oracle), in Python floats."""

from __future__ import annotations

from specreg_eagle.kernels.residual_draw.torch_impl import DRAW_BLOCK


def two_level_draw_reference(weights: list[float], coin: float) -> int:
    """The first token with positive weight whose running weight exceeds `coin * total`,
    found block by block (`DRAW_BLOCK` tokens); the last positive token when rounding leaves
    none; -1 for a row without mass."""
    blocks = [weights[i:i + DRAW_BLOCK] for i in range(0, len(weights), DRAW_BLOCK)]
    sums = [sum(block) for block in blocks]
    target = coin * sum(sums)
    positive = [i for i, s in enumerate(sums) if s > 0]
    if not positive:
        return -1
    chosen, running = positive[-1], 0.0
    for i, s in enumerate(sums):
        if s > 0 and running + s > target:
            chosen = i
            break
        running += s
    running = sum(sums[:chosen])
    last_positive = -1
    for j, w in enumerate(blocks[chosen]):
        running += w
        if w > 0:
            last_positive = j
            if running > target:
                return chosen * DRAW_BLOCK + j
    return chosen * DRAW_BLOCK + last_positive
