"""The error catalog: the single source for every code specreg or a plugin raises.

The core keeps its entries here (`core`, `kernels`: SR100-SR199, SR900-SR999). Plugins register
theirs through `specreg_register_errors` while a registry loads: the plugins shipped in
specreg's own distribution use SR200-SR499, third parties SR500-SR899. A plugin package may also
register its entries when imported, so its kernels raise coded errors without a registry. The
pages under `docs/errors/` are generated from the core entries and the shipped plugins'
(`python -m specreg.docgen`) and a test keeps them in sync.
"""

from __future__ import annotations

import importlib.metadata
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
    from specreg.catalog import core, frameworks, kernels, usage

    table: dict[str, ErrorEntry] = {}
    for module in (core, usage, kernels, frameworks):
        for entry in module.ENTRIES:
            if entry.code in table:
                raise RuntimeError(f"error code {entry.code} is defined twice")
            table[entry.code] = entry
    return dict(sorted(table.items()))


_TABLE: dict[str, ErrorEntry] | None = None

#: Codes third-party plugins may register through `specreg_register_errors` (SR500-SR899).
PLUGIN_CODES = range(500, 900)
#: Codes the plugins shipped in specreg's own distribution register (SR200-SR499).
SHIPPED_PLUGIN_CODES = range(200, 500)
_PLUGIN_ENTRIES: dict[str, tuple[ErrorEntry, str, bool]] = {}  # code -> (entry, plugin, shipped)
_PLUGIN_LOCK = threading.Lock()


def core_entries() -> dict[str, ErrorEntry]:
    """The entries of specreg's core, by code, sorted."""
    global _TABLE
    if _TABLE is None:
        _TABLE = _collect()
    return _TABLE


def builtin_entries() -> dict[str, ErrorEntry]:
    """The core's entries and those the shipped plugins registered so far, sorted by code.

    Load a registry first (`Registry.load()`) to include every shipped plugin's entries."""
    table = dict(core_entries())
    with _PLUGIN_LOCK:
        table.update({c: e for c, (e, _, shipped) in _PLUGIN_ENTRIES.items() if shipped})
    return dict(sorted(table.items()))


def entries() -> dict[str, ErrorEntry]:
    """Every entry: the core's and those loaded plugins registered, sorted by code."""
    table = dict(core_entries())
    with _PLUGIN_LOCK:
        table.update({code: entry for code, (entry, _, _) in _PLUGIN_ENTRIES.items()})
    return dict(sorted(table.items()))


def shipped_packages() -> frozenset[str]:
    """The top-level packages of specreg's own distribution (the core and its plugins)."""
    try:
        text = importlib.metadata.distribution("specreg").read_text("top_level.txt") or ""
    except importlib.metadata.PackageNotFoundError:
        return frozenset({"specreg"})
    return frozenset(text.split())


def register_plugin_entry(
    entry: ErrorEntry, plugin: str, *, package: str | None = None
) -> str | None:
    """Add the entry of `plugin`, whose code lives in top-level `package`. Returns None, or why
    the entry was refused. Packages shipped with specreg use SR200-SR499, others SR500-SR899."""
    shipped = package is not None and package != "specreg" and package in shipped_packages()
    allowed = SHIPPED_PLUGIN_CODES if shipped else PLUGIN_CODES
    number = int(entry.code[2:])
    if number not in allowed:
        return (
            f"code {entry.code} is outside the range plugins may use "
            f"(SR{allowed.start}-SR{allowed.stop - 1})"
        )
    with _PLUGIN_LOCK:
        taken = _PLUGIN_ENTRIES.get(entry.code)
        if taken is not None and taken[0] != entry:  # the same entry again is fine
            return f"code {entry.code} is already registered by plugin {taken[1]!r}"
        if taken is None:
            _PLUGIN_ENTRIES[entry.code] = (entry, plugin, shipped)
    return None


def register_package_entries(entries: Iterable[ErrorEntry], plugin: str, package: str) -> None:
    """Register a plugin package's entries when it is imported, so its kernels raise coded
    errors without a registry; a refusal is a bug in the package (RuntimeError)."""
    refused = [r for r in (register_plugin_entry(e, plugin, package=package) for e in entries) if r]
    if refused:
        raise RuntimeError(f"{package}: " + "; ".join(refused))


def lookup(code: str) -> ErrorEntry:
    """The entry for `code` (case-insensitive). Raises `KeyError` for an unknown code."""
    key = code.strip().upper()
    table = core_entries()
    if key in table:
        return table[key]
    with _PLUGIN_LOCK:
        if key in _PLUGIN_ENTRIES:
            return _PLUGIN_ENTRIES[key][0]
    raise KeyError(f"unknown specreg error code {code!r}")
