"""The error catalog: what every code specreg or a plugin raises means, and who may use which code.

The core keeps its entries as module constants (`core`, `plugins`, `usage`, `kernels`,
`frameworks`, `acceptance`: SR100-SR199, SR900-SR999); they never change. Plugins register theirs through
`specreg_register_errors` into the `Catalog` of the registry that loads them: the plugins
shipped in specreg's own distribution use SR200-SR499, third parties SR500-SR899. No table is
shared between registries: `registry.catalog` answers for one registry, `lookup` for the core.
A `Problem` checks its code's shape and range when it is created (`check_code`), so a plugin's
kernels raise coded errors without a registry. The pages under `docs/errors/` are generated
from the core entries and the shipped plugins' (`python tools/docgen.py`) and a test keeps
them in sync.
"""

from __future__ import annotations

import importlib.metadata
from collections.abc import Mapping

import attrs

from specreg.catalog.entry import CODE_RE, ErrorEntry

__all__ = ["Catalog", "ErrorEntry", "check_code", "core_entries", "lookup"]

#: Codes third-party plugins may register through `specreg_register_errors` (SR500-SR899).
PLUGIN_CODES = range(500, 900)
#: Codes the plugins shipped in specreg's own distribution register (SR200-SR499).
SHIPPED_PLUGIN_CODES = range(200, 500)
#: Codes of specreg's core (SR100-SR199 and SR900-SR999), all defined in this package.
CORE_CODES = (range(100, 200), range(900, 1000))


def _collect() -> dict[str, ErrorEntry]:
    from specreg.catalog import acceptance, core, frameworks, kernels, plugins, usage

    table: dict[str, ErrorEntry] = {}
    for module in (core, plugins, usage, kernels, frameworks, acceptance):
        for entry in module.ENTRIES:
            if entry.code in table:
                raise RuntimeError(f"error code {entry.code} is defined twice")
            table[entry.code] = entry
    return dict(sorted(table.items()))


_CORE: Mapping[str, ErrorEntry] | None = None  # built once from the module constants


def core_entries() -> Mapping[str, ErrorEntry]:
    """The entries of specreg's core, by code, sorted (read-only)."""
    global _CORE
    if _CORE is None:
        from types import MappingProxyType

        _CORE = MappingProxyType(_collect())
    return _CORE


def _is_core(number: int) -> bool:
    return any(number in codes for codes in CORE_CODES)


def check_code(code: str) -> None:
    """Raise `KeyError` unless `code` can be raised: a core code the catalog defines, or a code
    in the plugins' ranges (SR200-SR899). Whether a plugin registered it is checked where its
    registry is known: at registration (SR119) and by `specreg explain`."""
    if not isinstance(code, str) or not CODE_RE.match(code):
        raise KeyError(f"unknown specreg error code {code!r}")
    number = int(code[2:])
    if _is_core(number):
        if code not in core_entries():
            raise KeyError(f"unknown specreg error code {code!r}")
    elif number not in SHIPPED_PLUGIN_CODES and number not in PLUGIN_CODES:
        raise KeyError(f"unknown specreg error code {code!r}")


def lookup(code: str) -> ErrorEntry:
    """The core entry for `code` (case-insensitive). Raises `KeyError` for any other code; a
    plugin's entries are in the `catalog` of the registry that loaded it."""
    key = code.strip().upper()
    table = core_entries()
    if key in table:
        return table[key]
    raise KeyError(f"unknown specreg error code {code!r}")


def shipped_packages() -> frozenset[str]:
    """The top-level packages of specreg's own distribution (the core and its plugins)."""
    try:
        text = importlib.metadata.distribution("specreg").read_text("top_level.txt") or ""
    except importlib.metadata.PackageNotFoundError:
        return frozenset({"specreg"})
    return frozenset(text.split())


def plugin_code_range(package: str | None) -> range:
    """The codes a plugin defined in top-level `package` may register: SR200-SR499 for the
    packages shipped with specreg, SR500-SR899 for everyone else."""
    shipped = package is not None and package != "specreg" and package in shipped_packages()
    return SHIPPED_PLUGIN_CODES if shipped else PLUGIN_CODES


def range_problem(entry: ErrorEntry, allowed: range) -> str | None:
    """Why `entry` may not be registered with codes `allowed`, or None."""
    if int(entry.code[2:]) in allowed:
        return None
    return (
        f"code {entry.code} is outside the range plugins may use "
        f"(SR{allowed.start}-SR{allowed.stop - 1})"
    )


@attrs.frozen
class PluginEntry:
    """A catalog entry one plugin registered, and whether that plugin ships with specreg."""

    entry: ErrorEntry
    plugin: str
    shipped: bool


class Catalog:
    """The entries one registry knows: the core's and those its plugins registered.

    A registry builds a new catalog every time its plugins change (`add` while it builds, then
    only reads), so two registries never see each other's plugin codes.
    """

    def __init__(self) -> None:
        self._plugins: dict[str, PluginEntry] = {}

    def refusal(self, entry: ErrorEntry, plugin: str, *, package: str | None = None) -> str | None:
        """Why `plugin` (defined in top-level `package`) may not register `entry`, or None."""
        reason = range_problem(entry, plugin_code_range(package))
        if reason is not None:
            return reason
        taken = self._plugins.get(entry.code)
        if taken is not None and taken.entry != entry:  # the same entry again is fine
            return f"code {entry.code} is already registered by plugin {taken.plugin!r}"
        return None

    def add(self, entry: ErrorEntry, plugin: str, *, package: str | None = None) -> None:
        """Store an entry `refusal` accepted; a code keeps its first owner."""
        shipped = plugin_code_range(package) is SHIPPED_PLUGIN_CODES
        self._plugins.setdefault(entry.code, PluginEntry(entry, plugin, shipped))

    def lookup(self, code: str) -> ErrorEntry:
        """The entry for `code` (case-insensitive), the core's or a plugin's; `KeyError` else."""
        key = code.strip().upper()
        found = self._plugins.get(key)
        return found.entry if found is not None else lookup(key)

    def owner(self, code: str) -> str | None:
        """The plugin that registered `code`, or None (a core code or an unknown one)."""
        found = self._plugins.get(code.strip().upper())
        return found.plugin if found is not None else None

    def entries(self) -> dict[str, ErrorEntry]:
        """Every entry: the core's and this registry's plugins', sorted by code."""
        table = dict(core_entries())
        table.update({code: p.entry for code, p in self._plugins.items()})
        return dict(sorted(table.items()))

    def builtin_entries(self) -> dict[str, ErrorEntry]:
        """The core's entries and the shipped plugins' (the ones documented under docs/errors)."""
        table = dict(core_entries())
        table.update({code: p.entry for code, p in self._plugins.items() if p.shipped})
        return dict(sorted(table.items()))
