"""The error catalog: the single source for every code specreg or a built-in plugin raises.

Each area keeps its entries in its own module (`core`, `kernels`, `eagle`, `dspark`, `hisparse`),
so code ranges never collide. The pages under `docs/errors/` are generated from here
(`python -m specreg.docgen`) and a test keeps them in sync.
"""

from __future__ import annotations

import re
import threading
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
    from specreg.catalog import core, dspark, eagle, frameworks, hisparse, kernels

    table: dict[str, ErrorEntry] = {}
    for module in (core, kernels, eagle, dspark, hisparse, frameworks):
        for entry in module.ENTRIES:
            if entry.code in table:
                raise RuntimeError(f"error code {entry.code} is defined twice")
            table[entry.code] = entry
    return dict(sorted(table.items()))


_TABLE: dict[str, ErrorEntry] | None = None

#: Codes third-party plugins may register through `specreg_register_errors` (SR500-SR899).
PLUGIN_CODES = range(500, 900)
_PLUGIN_ENTRIES: dict[str, tuple[ErrorEntry, str]] = {}
_PLUGIN_LOCK = threading.Lock()


def builtin_entries() -> dict[str, ErrorEntry]:
    """The entries specreg and its built-in plugins ship, by code, sorted."""
    global _TABLE
    if _TABLE is None:
        _TABLE = _collect()
    return _TABLE


def entries() -> dict[str, ErrorEntry]:
    """Every entry: the built-in ones and those loaded plugins registered, sorted by code."""
    table = dict(builtin_entries())
    with _PLUGIN_LOCK:
        table.update({code: entry for code, (entry, _) in _PLUGIN_ENTRIES.items()})
    return dict(sorted(table.items()))


def register_plugin_entry(entry: ErrorEntry, plugin: str) -> str | None:
    """Add a plugin's entry. Returns None, or why the entry was refused."""
    number = int(entry.code[2:])
    if number not in PLUGIN_CODES:
        return (
            f"code {entry.code} is outside the range plugins may use "
            f"(SR{PLUGIN_CODES.start}-SR{PLUGIN_CODES.stop - 1})"
        )
    with _PLUGIN_LOCK:
        taken = _PLUGIN_ENTRIES.get(entry.code)
        if taken is not None and taken[0] != entry:  # the same entry again is fine
            return f"code {entry.code} is already registered by plugin {taken[1]!r}"
        if taken is None:
            _PLUGIN_ENTRIES[entry.code] = (entry, plugin)
    return None


def lookup(code: str) -> ErrorEntry:
    """The entry for `code` (case-insensitive). Raises `KeyError` for an unknown code."""
    key = code.strip().upper()
    table = builtin_entries()
    if key in table:
        return table[key]
    with _PLUGIN_LOCK:
        if key in _PLUGIN_ENTRIES:
            return _PLUGIN_ENTRIES[key][0]
    raise KeyError(f"unknown specreg error code {code!r}")
