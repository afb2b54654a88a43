"""In-place exponentials of score rows at the speed of `exp2`, whatever the rows hold.

Torch's CPU `exp_` leaves its vector path for lanes far below zero: a row masked with -inf (a
grammar bitmask, a top-k cut) takes 2-7x as long as the same row unmasked, and lanes whose
result is subnormal up to 20x (measured on the project's AVX-512 machine, torch 2.13). `exp2_`
keeps one speed for every input and is faster on plain rows too, so `exp_(x)` computes
exp(x) as exp2(x * log2(e)): within 4e-6 relative of exp for x in [-87, 0] (5e-7 for
x in [-10, 0]), exactly 0 for -inf and exactly 1 for 0, which is all a sampling rule reads of
weights exp(z - max(z)). On accelerators `exp_` is torch's own.
"""

from __future__ import annotations

import math

import torch

LOG2_E = 1.0 / math.log(2.0)


def exp_(x: torch.Tensor) -> torch.Tensor:
    """exp(x) in place (module docstring); returns `x`."""
    if x.device.type != "cpu":
        return x.exp_()
    return x.mul_(LOG2_E).exp2_()
