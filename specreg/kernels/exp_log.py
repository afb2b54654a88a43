"""The one exp and the one log of the torch sampling path: `exp_` (0 at or below `EXP_FLOOR`), `log_`.

Every processed value of the torch path (the filters' weights and masses, the rows the race
reads, the acceptance test's probability, the logprobs) goes through `exp_`, and every log of a
probability through `log_` (or `log_keys_`, which also makes the filters' keys), so a value has
the same bits wherever it is computed; the Triton filter's `exp_weight` floors at the same
`EXP_FLOOR`.
"""

from __future__ import annotations

import torch

#: A token's weight exp(z - max z) is 0 when z - max z <= EXP_FLOOR, on every backend (`exp_`,
#: the Triton filter's `exp_weight`, the filtering reference): e**-87 is 1.6e-38, the bottom of
#: float32's normal range, so no kept weight is subnormal (GPUs flush those) and the CPU exp
#: never leaves its vector path.
EXP_FLOOR = -87.0
_FLOOR_VALUES: dict[torch.device, float] = {}


def _floor_value(device: torch.device) -> float:
    """exp(EXP_FLOOR) as this device's exp computes it (once per device)."""
    value = _FLOOR_VALUES.get(device)
    if value is None:
        value = float(torch.tensor(EXP_FLOOR, device=device).exp())
        _FLOOR_VALUES[device] = value
    return value


def exp_(x: torch.Tensor) -> torch.Tensor:
    """The one exp of the torch sampling path: exp(x) in place, 0 for x <= `EXP_FLOOR`; returns
    `x`. Every processed value (the filters' weights and masses, the rows the race reads, the
    single-token probability of the acceptance test, the logprobs) goes through it.

    torch's exp, not exp2(x * log2(e)): torch's CPU exp2 computes a tensor's last few elements
    with a scalar exp2 that differs from its vector one by an ulp, so one token's value depended
    on the tensor it sat in; torch's exp (MKL's vector exp on CPU) gives every element the same
    bits wherever it sits. That exp leaves its vector path for lanes far below zero (-inf from
    a grammar mask or a cut: 2-7x the time, subnormal results 20x), so lanes are clamped to
    `EXP_FLOOR` first and their results, exp(EXP_FLOOR) or below, set to 0 (`threshold_`; NaN
    stays NaN): one speed for every input, the same as exp2's (0.22 ms per 512k elements for
    both on plain, -inf-masked or subnormal rows; torch 2.13, AVX-512, one thread)."""
    floor = _floor_value(x.device)
    return torch.nn.functional.threshold_(x.clamp_min_(EXP_FLOOR).exp_(), floor, 0.0)


def _zero_lanes(p: torch.Tensor) -> torch.Tensor | None:
    """The mask p <= 0 of float32 probabilities when a CPU block holds such lanes (one min pass
    finds out), else None."""
    return p <= 0 if p.numel() and bool(p.amin() <= 0) else None


def log_(p: torch.Tensor, *, fresh: bool = False) -> torch.Tensor:
    """The one log of the torch sampling path on float32 probabilities: log(p), -inf where
    p <= 0 (the -inf padding of a prefix included), in place (or into a new tensor with
    `fresh`). On CPU, torch's log (MKL's vector log: the same bits wherever a value sits) takes
    25x as long on zeros as on normal values, so a block holding any has them set to 1 for the
    log and to -inf after."""
    zero = _zero_lanes(p) if p.device.type == "cpu" else None
    if zero is None:
        return torch.log(p) if fresh else p.log_()
    ones = p.masked_fill(zero, 1.0) if fresh else p.masked_fill_(zero, 1.0)
    return ones.log_().masked_fill_(zero, float("-inf"))


def log_keys_(p: torch.Tensor) -> torch.Tensor:
    """`log_(p, fresh=True)`, and `p` made the filters' key in place: lanes p <= 0 set to -inf
    (a zero probability is a masked token, as its log says). One zero test serves both."""
    if p.device.type != "cpu":
        out = torch.log(p)
        p.masked_fill_(p <= 0, float("-inf"))
        return out
    zero = _zero_lanes(p)
    if zero is None:
        return torch.log(p)
    out = p.masked_fill(zero, 1.0).log_().masked_fill_(zero, float("-inf"))
    p.masked_fill_(zero, float("-inf"))
    return out
