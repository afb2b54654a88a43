"""What plugins register: `AlgorithmSpec` and `CacheSpec`, with declared capabilities.

A serving framework branches on these declared capabilities (`spec.drafting == "tree"`,
`spec.uses_target_hidden_states`), never on algorithm names.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any, Literal

import attrs

Drafting = Literal["chain", "tree", "block"]
DRAFTING_STYLES: tuple[str, ...] = ("chain", "tree", "block")
VERIFY_RULES: tuple[str, ...] = (
    "greedy",  # chain leading-match against the target argmax
    "chain_sampling",  # chain rejection sampling (lossless)
    "tree_greedy",  # longest tree path matching the target argmax
    "tree_sampling",  # tree speculative sampling (lossless at thresholds 1.0)
    "block",  # block verification (arXiv 2403.10444)
)


def _lower(value: str) -> str:
    return str(value).strip().lower()


def _lower_tuple(values: Any) -> tuple[str, ...]:
    if isinstance(values, str):
        values = (values,)
    return tuple(_lower(v) for v in values)


@attrs.frozen
class ParamRange:
    """The valid range and default of one integer parameter. `maximum=None` means unbounded."""

    minimum: int = 1
    maximum: int | None = None
    default: int | None = None

    def __attrs_post_init__(self) -> None:
        if self.maximum is not None and self.maximum < self.minimum:
            raise ValueError(f"maximum {self.maximum} is below minimum {self.minimum}")
        if self.default is not None and not self.contains(self.default):
            raise ValueError(f"default {self.default} lies outside {self.describe()}")

    def contains(self, value: int) -> bool:
        return value >= self.minimum and (self.maximum is None or value <= self.maximum)

    def describe(self) -> str:
        high = "inf" if self.maximum is None else str(self.maximum)
        return f"[{self.minimum}, {high}]"


@attrs.frozen(kw_only=True)
class Origin:
    """Which plugin and distribution registered a spec (filled in by the registry)."""

    plugin: str
    distribution: str | None = None
    version: str | None = None


@attrs.frozen(kw_only=True)
class AlgorithmSpec:
    """A speculative-decoding algorithm and what it can do.

    `name` is stored lower-case and looked up case-insensitively, as are `aliases`.
    """

    name: str = attrs.field(converter=_lower)
    drafting: Drafting = attrs.field(validator=attrs.validators.in_(DRAFTING_STYLES))
    verify_rules: tuple[str, ...] = attrs.field(converter=_lower_tuple)
    description: str = ""
    aliases: tuple[str, ...] = attrs.field(default=(), converter=_lower_tuple)
    uses_target_hidden_states: bool = False
    owns_draft_kv: bool = True
    supports_ragged_verify: bool = False
    num_steps: ParamRange = ParamRange(minimum=1, default=1)
    topk: ParamRange = ParamRange(minimum=1, default=1)
    num_draft_tokens: ParamRange = ParamRange(minimum=2, default=4)
    origin: Origin | None = None

    @name.validator
    def _check_name(self, _attr: object, value: str) -> None:
        if not value or not value.replace("_", "").replace("-", "").isalnum():
            raise ValueError(f"algorithm names are non-empty [a-z0-9_-], got {value!r}")

    @verify_rules.validator
    def _check_rules(self, _attr: object, value: tuple[str, ...]) -> None:
        unknown = [r for r in value if r not in VERIFY_RULES]
        if unknown or not value:
            raise ValueError(f"verify_rules must be a non-empty subset of {VERIFY_RULES}, got {value}")

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def capabilities(self) -> dict[str, Any]:
        return {
            "drafting": self.drafting,
            "verify_rules": list(self.verify_rules),
            "uses_target_hidden_states": self.uses_target_hidden_states,
            "owns_draft_kv": self.owns_draft_kv,
            "supports_ragged_verify": self.supports_ragged_verify,
        }

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "description": self.description,
            "capabilities": self.capabilities(),
            "ranges": {
                field: {"min": r.minimum, "max": r.maximum, "default": r.default}
                for field, r in (
                    ("num_steps", self.num_steps),
                    ("topk", self.topk),
                    ("num_draft_tokens", self.num_draft_tokens),
                )
            },
            "plugin": self.origin.plugin if self.origin else None,
            "distribution": self.origin.distribution if self.origin else None,
            "version": self.origin.version if self.origin else None,
        }


def _frozen_mapping(value: Mapping[str, Any] | None) -> Mapping[str, Any]:
    return MappingProxyType(dict(value or {}))


@attrs.frozen(kw_only=True)
class CacheSpec:
    """A KV-cache backend. `options` maps each option name to its default."""

    name: str = attrs.field(converter=_lower)
    description: str = ""
    aliases: tuple[str, ...] = attrs.field(default=(), converter=_lower_tuple)
    options: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_frozen_mapping, eq=False, hash=False
    )
    origin: Origin | None = None

    @property
    def names(self) -> tuple[str, ...]:
        return (self.name, *self.aliases)

    def to_dict(self) -> dict[str, Any]:
        return {
            "name": self.name,
            "aliases": list(self.aliases),
            "description": self.description,
            "options": dict(self.options),
            "plugin": self.origin.plugin if self.origin else None,
            "distribution": self.origin.distribution if self.origin else None,
            "version": self.origin.version if self.origin else None,
        }
