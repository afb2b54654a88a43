"""The argument checks of tree sampling that the sampling rules share: coins and thresholds.

Shapes and dtypes always; the coins' values where values are checked (`check_values`, as every
wrapper decides). The tree tensors' checks are the greedy family's (`specreg.kernels.
tree_verify_greedy.checks`), shared by every tree verify rule.
"""

from __future__ import annotations

import torch

from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import FLOAT_DTYPES, check_dtype, check_shape


def check_coins(coins: torch.Tensor | None, b: int, n: int) -> None:
    """A caller's acceptance coins: float [b, N] (SR900, SR901), or None."""
    if coins is not None:
        check_shape("coins", coins, (b, n))
        check_dtype("coins", coins, FLOAT_DTYPES)


def check_coin_values(coins: torch.Tensor | None) -> None:
    """SR904 unless every caller coin lies in [0, 1) (reads the data)."""
    if coins is not None and not bool(((coins >= 0) & (coins < 1)).all()):
        raise KernelInputError(
            problem("SR904", "coins holds values outside [0, 1)", accepted="[0, 1)",
                    fix="leave them out: they come from the random stream keyed by keys= "
                    "and positions=", field="coins")
        )


def check_thresholds(threshold_single: float, threshold_acc: float) -> None:
    """SR904 unless both relaxed thresholds of the target-only rule lie in (0, 1]."""
    for name, value in (("threshold_single", threshold_single), ("threshold_acc", threshold_acc)):
        if not isinstance(value, (int, float)) or not 0.0 < float(value) <= 1.0:
            raise KernelInputError(
                problem("SR904", f"{name}={value!r} is outside (0, 1]", accepted="(0, 1]",
                        fix=f"pass {name}=1.0 for lossless sampling", field=name)
            )
