"""The three speculative phases whose per-request token widths a plan resolves."""

from __future__ import annotations

import enum

from specreg._suggest import did_you_mean
from specreg.errors import UnknownPhaseError, problem


class Phase(str, enum.Enum):
    """A speculative forward phase.

    - `DRAFT_DECODE`: one draft-model step; one token per tree branch.
    - `DRAFT_EXTEND`: the draft model catching up on the tokens just accepted.
    - `TARGET_VERIFY`: the target (or a verify-shaped draft forward) scoring the proposals.
    """

    DRAFT_DECODE = "draft_decode"
    DRAFT_EXTEND = "draft_extend"
    TARGET_VERIFY = "target_verify"

    # Hash and compare like the plain string so plans can key tables by either form cheaply.
    __hash__ = str.__hash__

    def __str__(self) -> str:
        return self.value

    @classmethod
    def parse(cls, value: object) -> Phase:
        """Accept a Phase, or a string in any case with '-' or ' ' for '_'."""
        if isinstance(value, Phase):
            return value
        if isinstance(value, str):
            key = value.strip().lower().replace("-", "_").replace(" ", "_")
            for phase in cls:
                if phase.value == key:
                    return phase
        else:
            key = repr(value)
        valid = [p.value for p in cls]
        raise UnknownPhaseError(
            problem(
                "SR100",
                f"Unknown speculative phase {value!r}.{did_you_mean(str(key), valid)}",
                accepted=", ".join(valid),
                fix="pass one of the valid phases, e.g. specreg.Phase.TARGET_VERIFY",
                field="phase",
            )
        )


PHASES: tuple[Phase, ...] = tuple(Phase)
