"""The sizes a resolved config implies: gamma and every phase's width, per adaptive candidate too.

`Sizes` is what one resolved config needs (gamma and the width of every phase on both workers);
a `Candidate` is one adaptive step count with its own config and sizes. A `Resolution` holds the
main config's sizes, every candidate's, and their maxima, which size every buffer.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from types import MappingProxyType
from typing import Any

import attrs

from specreg.contract.config import SpecConfig
from specreg.contract.phase import PHASES, Phase


def _freeze_widths(value: Mapping[Phase, int]) -> Mapping[Phase, int]:
    return MappingProxyType({Phase.parse(k): int(v) for k, v in value.items()})


@attrs.frozen(kw_only=True)
class Sizes:
    """Gamma and the per-request width of every phase on the target and the draft worker."""

    gamma: int
    target: Mapping[Phase, int] = attrs.field(converter=_freeze_widths, eq=False)
    draft: Mapping[Phase, int] = attrs.field(converter=_freeze_widths, eq=False)

    @classmethod
    def same_on_both(cls, gamma: int, widths: Mapping[Phase, int]) -> Sizes:
        """Sizes whose widths are equal on both workers."""
        return cls(gamma=gamma, target=widths, draft=widths)

    def width(self, phase: Phase | str, is_draft_worker: bool = False) -> int:
        table = self.draft if is_draft_worker else self.target
        return table[Phase.parse(phase)]

    @property
    def verify_width(self) -> int:
        """The target's `target_verify` width: the tokens one verify scores per request."""
        return self.target[Phase.TARGET_VERIFY]

    def widths_dict(self) -> dict[str, dict[str, int]]:
        return {
            "target": {p.value: self.target[p] for p in PHASES},
            "draft": {p.value: self.draft[p] for p in PHASES},
        }

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Sizes):
            return NotImplemented
        return (self.gamma, self.widths_dict()) == (other.gamma, other.widths_dict())

    __hash__ = None  # type: ignore[assignment]


def max_sizes(all_sizes: Iterable[Sizes]) -> Sizes:
    """The element-wise maxima: buffers sized from them fit every one of `all_sizes`."""
    items = list(all_sizes)
    return Sizes(
        gamma=max(s.gamma for s in items),
        target={p: max(s.target[p] for s in items) for p in PHASES},
        draft={p: max(s.draft[p] for s in items) for p in PHASES},
    )


@attrs.frozen(kw_only=True)
class Candidate:
    """One adaptive step count: the config the owning plugin derived for it, and its sizes."""

    steps: int
    config: SpecConfig
    sizes: Sizes

    @property
    def gamma(self) -> int:
        return self.sizes.gamma

    def to_dict(self) -> dict[str, Any]:
        return {
            "steps": self.steps,
            "num_steps": self.config.num_steps,
            "topk": self.config.topk,
            "num_draft_tokens": self.config.num_draft_tokens,
            "gamma": self.sizes.gamma,
            "widths": self.sizes.widths_dict(),
        }


@attrs.frozen(kw_only=True)
class Resolution:
    """What the resolution hooks answered for one config, in one pass.

    `main` holds the sizes of the config itself, `candidates` those of every adaptive step
    count (empty without `candidate_steps`). `gamma`, `target` and `draft` are the maxima over
    the main config and every candidate, so buffers sized from them fit every candidate.
    """

    config: SpecConfig
    main: Sizes
    candidates: tuple[Candidate, ...] = ()
    maxima: Sizes = attrs.field(init=False, eq=False)

    def __attrs_post_init__(self) -> None:
        object.__setattr__(
            self, "maxima", max_sizes([self.main, *(c.sizes for c in self.candidates)])
        )

    @property
    def gamma(self) -> int:
        return self.maxima.gamma

    @property
    def target(self) -> Mapping[Phase, int]:
        return self.maxima.target

    @property
    def draft(self) -> Mapping[Phase, int]:
        return self.maxima.draft

    def configs(self) -> tuple[SpecConfig, ...]:
        """The main config, then every candidate's."""
        return (self.config, *(c.config for c in self.candidates))

    def widths_dict(self) -> dict[str, dict[str, int]]:
        return self.maxima.widths_dict()

    def to_dict(self) -> dict[str, Any]:
        out = {"gamma": self.gamma, "widths": self.widths_dict(), "config": self.config.to_dict()}
        if self.candidates:
            out["candidates"] = [c.to_dict() for c in self.candidates]
        return out


def adaptive_steps(config: SpecConfig) -> tuple[int, ...]:
    """The positive entries of `config.candidate_steps`, sorted (0 = speculation off)."""
    return tuple(sorted(s for s in config.candidate_steps or () if s > 0))
