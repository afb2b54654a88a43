"""The exception hierarchy and the `Problem` record every error is built from.

Every error that reaches a user carries one or more `Problem`s. A problem has a stable code from
the catalog (`specreg explain CODE`), says what was wrong, lists the accepted values and names the
fix. Configuration errors also subclass `ValueError`, so `except ValueError` keeps working.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Literal

import attrs

Severity = Literal["error", "warning"]


@attrs.frozen(kw_only=True)
class Problem:
    """One thing wrong with a configuration or a call, with its code and its fix."""

    code: str
    message: str
    accepted: str = ""
    fix: str = ""
    field: str | None = None
    severity: Severity = "error"

    def __attrs_post_init__(self) -> None:
        from specreg.catalog import check_code

        # An undefined core code, or one outside every range, is a bug in specreg or a plugin:
        # fail loudly. A plugin code's entry is checked where its registry is known (SR119).
        check_code(self.code)

    @property
    def is_error(self) -> bool:
        return self.severity == "error"

    def render(self) -> str:
        parts = [f"[{self.code}] {_sentence(self.message)}"]
        if self.accepted:
            parts.append(f"Accepted: {_sentence(self.accepted)}")
        if self.fix:
            parts.append(f"Fix: {_sentence(self.fix)}")
        parts.append(f"(specreg explain {self.code})")
        return " ".join(parts)

    def to_dict(self) -> dict[str, object]:
        return attrs.asdict(self)

    __str__ = render


def _sentence(text: str) -> str:
    text = text.strip()
    return text if text.endswith((".", "?", "!")) else text + "."


class SpecRegError(Exception):
    """Root of every error specreg raises on purpose."""

    problems: tuple[Problem, ...]

    def __init__(self, problems: Problem | Iterable[Problem]) -> None:
        if isinstance(problems, Problem):
            problems = (problems,)
        self.problems = tuple(problems)
        if not self.problems:
            raise TypeError("a SpecRegError needs at least one Problem")
        super().__init__(self._format())

    @property
    def code(self) -> str:
        """The code of the first problem; `codes` lists all of them."""
        return self.problems[0].code

    @property
    def codes(self) -> tuple[str, ...]:
        return tuple(p.code for p in self.problems)

    def _format(self) -> str:
        if len(self.problems) == 1:
            return self.problems[0].render()
        lines = [f"{len(self.problems)} problems:"]
        lines += [f"  - {p.render()}" for p in self.problems]
        return "\n".join(lines)

    # Pickle support (spawned workers re-raise errors from children).
    def __reduce__(self) -> tuple[object, ...]:
        return (type(self), (self.problems,))


class ConfigError(SpecRegError, ValueError):
    """A configuration is invalid. Lists every problem found, not only the first."""


class UnknownPhaseError(ConfigError):
    """A phase name is not one of `draft_decode`, `draft_extend`, `target_verify`."""


class UnknownNameError(ConfigError):
    """An algorithm or cache name is not registered."""


class PluginError(SpecRegError):
    """A plugin failed to load, registered something invalid, or raised inside a hook."""


class KernelInputError(SpecRegError, ValueError):
    """A kernel was called with tensors of the wrong shape, dtype, device or index range."""


class UnknownKeywordError(KernelInputError, TypeError):
    """A verifier's or drafter's method was given a keyword it does not take (SR930). Also a
    `TypeError`, the exception Python raises for an unexpected keyword."""


class CacheMissError(SpecRegError, RuntimeError):
    """A KV-cache swap was asked for a token that has no host copy."""


class ConsistencyError(SpecRegError, RuntimeError):
    """Ranks of one serving job resolved different plans."""


def problem(
    code: str,
    message: str,
    *,
    accepted: str = "",
    fix: str = "",
    field: str | None = None,
    severity: Severity = "error",
) -> Problem:
    """Shorthand constructor used across specreg and its plugins."""
    return Problem(
        code=code, message=message, accepted=accepted, fix=fix, field=field, severity=severity
    )


def split_problems(problems: Sequence[Problem]) -> tuple[list[Problem], list[Problem]]:
    """Split into (errors, warnings)."""
    errors = [p for p in problems if p.is_error]
    warnings = [p for p in problems if not p.is_error]
    return errors, warnings


def dedupe_problems(problems: Iterable[Problem]) -> list[Problem]:
    """`problems` in order, each (code, message) pair once: two checks may find the same fault."""
    seen: set[tuple[str, str]] = set()
    out = []
    for p in problems:
        key = (p.code, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
