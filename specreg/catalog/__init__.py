"""The error catalog: the single source for every code specreg or a built-in plugin raises.

Each area keeps its entries in its own module (`core`, `kernels`, `eagle`, `dspark`, `hisparse`),
so code ranges never collide. The pages under `docs/errors/` are generated from here
(`python -m specreg.docgen`) and a test keeps them in sync.
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import attrs

_CODE_RE = re.compile(r"^SR\d{3}$")


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
        if not _CODE_RE.match(value):
            raise ValueError(f"error codes look like SR123, got {value!r}")

    def render_text(self) -> str:
        lines = [f"{self.code}: {self.title}", "", "What it means", f"  {self.meaning}", ""]
        lines += ["When it happens", f"  {self.when}", "", "Solutions"]
        lines += [f"  {i}. {s}" for i, s in enumerate(self.solutions, 1)]
        lines += ["", "Example fix"]
        lines += [f"  {line}" for line in self.example_fix.strip("\n").splitlines()]
        return "\n".join(lines)


def _collect() -> dict[str, ErrorEntry]:
    from specreg.catalog import core, dspark, eagle, hisparse, kernels

    table: dict[str, ErrorEntry] = {}
    for module in (core, kernels, eagle, dspark, hisparse):
        for entry in module.ENTRIES:
            if entry.code in table:
                raise RuntimeError(f"error code {entry.code} is defined twice")
            table[entry.code] = entry
    return dict(sorted(table.items()))


_TABLE: dict[str, ErrorEntry] | None = None


def entries() -> dict[str, ErrorEntry]:
    """Every catalog entry by code, sorted."""
    global _TABLE
    if _TABLE is None:
        _TABLE = _collect()
    return _TABLE


def lookup(code: str) -> ErrorEntry:
    """The entry for `code` (case-insensitive). Raises `KeyError` for an unknown code."""
    table = entries()
    key = code.strip().upper()
    if key not in table:
        raise KeyError(f"unknown specreg error code {code!r}")
    return table[key]
