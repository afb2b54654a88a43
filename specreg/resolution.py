"""`Resolution`: a resolved config with its gamma and the width of every phase on both workers."""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from specreg.config import SpecConfig
from specreg.phase import PHASES, Phase


def _freeze_widths(value: Mapping[Phase, int]) -> Mapping[Phase, int]:
    return MappingProxyType({Phase.parse(k): int(v) for k, v in value.items()})


@attrs.frozen(kw_only=True)
class Resolution:
    """What the resolution hooks answered for one config.

    With adaptive `candidate_steps`, widths and gamma are the maxima over all candidates, so
    buffers sized from them fit every candidate.
    """

    config: SpecConfig
    gamma: int
    target: Mapping[Phase, int] = attrs.field(converter=_freeze_widths, eq=False)
    draft: Mapping[Phase, int] = attrs.field(converter=_freeze_widths, eq=False)

    def width(self, phase: Phase | str, is_draft_worker: bool = False) -> int:
        table = self.draft if is_draft_worker else self.target
        return table[Phase.parse(phase)]

    def widths_dict(self) -> dict[str, dict[str, int]]:
        return {
            "target": {p.value: self.target[p] for p in PHASES},
            "draft": {p.value: self.draft[p] for p in PHASES},
        }

    def to_dict(self) -> dict[str, Any]:
        return {"gamma": self.gamma, "widths": self.widths_dict(), "config": self.config.to_dict()}
