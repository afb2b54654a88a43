"""The relaxed family's value: `RuleParams`, the numbers of one lossy acceptance rule as the kernels take them."""

from __future__ import annotations

import math
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import torch

#: `RuleParams.mode` values (the Triton kernel's MODE).
THRESHOLDS, TYPICAL, SYNTHETIC = 0, 1, 2


@attrs.frozen(kw_only=True)
class RuleParams:
    """One lossy rule (`specreg.contract.acceptance_rules`) as plain numbers.

    mode: THRESHOLDS (threshold_single, threshold_acc), TYPICAL (posterior_threshold,
    posterior_alpha) or SYNTHETIC (`rates`: rate i is the chance of accepting more than i
    drafts; positions past the end have rate 0).
    """

    mode: int
    threshold_single: float = 1.0
    threshold_acc: float = 1.0
    posterior_threshold: float = 0.09
    posterior_alpha: float = 0.3
    rates: tuple[float, ...] = ()
    _on_device: dict[Any, torch.Tensor] = attrs.field(
        factory=dict, eq=False, hash=False, repr=False, alias="_on_device"
    )

    @classmethod
    def of(cls, rule: object, gamma: int | None = None) -> RuleParams:
        """From an `AcceptanceRule` (lossy). A synthetic length becomes its rates: 'match-expected'
        1 for the whole drafts of length - 1, the fractional part next (one coin gives floor or
        ceil); 'multinomial' P(round(Normal(length, 1)) > i + 1) for the `gamma` positions i."""
        kind = rule.kind  # type: ignore[attr-defined]
        if kind == "synthetic":
            rates = rule.synthetic_rates  # type: ignore[attr-defined]
            if rates is None and rule.synthetic_method == "multinomial":  # type: ignore[attr-defined]
                mean = float(rule.synthetic_length)  # type: ignore[attr-defined]
                rates = tuple(0.5 * math.erfc((i + 1.5 - mean) / math.sqrt(2.0))
                              for i in range(gamma or 0))
            if rates is None:
                drafts = float(rule.synthetic_length) - 1.0  # type: ignore[attr-defined]
                whole = math.floor(drafts)
                rates = (1.0,) * whole + ((drafts - whole,) if drafts > whole else ())
            return cls(mode=SYNTHETIC, rates=tuple(float(r) for r in rates))
        if kind == "typical":
            thr, alpha = rule.typical_params()  # type: ignore[attr-defined]
            return cls(mode=TYPICAL, posterior_threshold=thr, posterior_alpha=alpha)
        if kind == "relaxed_thresholds":
            return cls(mode=THRESHOLDS, threshold_single=float(rule.threshold_single),  # type: ignore[attr-defined]
                       threshold_acc=float(rule.threshold_acc))  # type: ignore[attr-defined]
        raise ValueError(f"RuleParams.of needs a lossy rule, got {kind!r}")

    def rates_tensor(self, device: torch.device) -> torch.Tensor:
        """The synthetic rates as float32 on `device` (one element 0 when there are none), made
        at the first call per device and kept (no host-to-device copy per step)."""
        found = self._on_device.get(device)
        if found is None:
            import torch

            found = torch.tensor(self.rates or (0.0,), dtype=torch.float32, device=device)
            self._on_device[device] = found
        return found
