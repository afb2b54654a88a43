"""One catalog entry (`ErrorEntry`): what an error code means, when it happens, how to solve it."""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

#: The shape of every code: SR and three digits.
CODE_RE = re.compile(r"^SR\d{3}$")


def _texts(values: Iterable[str]) -> tuple[str, ...]:
    return tuple(values)


@attrs.frozen(kw_only=True)
class ErrorEntry:
    """What a code means, when it happens, how to solve it, and an example fix."""

    code: str = attrs.field()
    title: str
    meaning: str
    when: str
    solutions: tuple[str, ...] = attrs.field(converter=_texts)
    example_fix: str
    seed: bool = False  # one of the failures specreg started from

    @code.validator
    def _check_code(self, _attr: object, value: str) -> None:
        if not CODE_RE.match(value):
            raise ValueError(f"error codes look like SR123, got {value!r}")

    def render_text(self) -> str:
        lines = [f"{self.code}: {self.title}", "", "What it means", f"  {self.meaning}", ""]
        lines += ["When it happens", f"  {self.when}", "", "Solutions"]
        lines += [f"  {i}. {s}" for i, s in enumerate(self.solutions, 1)]
        lines += ["", "Example fix"]
        lines += [f"  {line}" for line in self.example_fix.strip("\n").splitlines()]
        return "\n".join(lines)
