"""Installs, once per framework process, the runtime substitutions an adapter's switch turns on.

`from_env` reads `SPECREG_SGLANG_SUBSTITUTE` / `SPECREG_VLLM_SUBSTITUTE` against the
substitutions the registry's plugins registered (`registry.substitutions()`, plain data resolved
once at load: `specreg.contract.substitutions`); `install_all` calls each one's installer inside
the framework's process (importing a ``"module:function"`` installer there), and logs one line
per process saying what is active; `active()` answers the same from inside that process.
Installers, the core's and the plugins', use `seam_missing` and `require_applied` so that a
seam the framework moved, or a hook it did not apply, stops start-up with SR182 instead of
leaving the framework's own kernel running.

The record of what is installed is per process because the patches are: `INSTALLED` holds it.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Callable
from typing import Any

from specreg.contract.substitutions import SWITCHES, Substitution, Table, parse
from specreg.errors import ConfigError, PluginError, problem

logger = logging.getLogger("specreg.adapters")

_FRAMEWORK_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}

#: Substitution name -> the installer that applied it in this process (the patches are global).
INSTALLED: dict[str, str] = {}


def registry_table() -> Table:
    """The substitutions of this process's registry (`Registry.load()`, as the adapters load
    it: SPECREG_PLUGINS applies)."""
    from specreg.registry.registry import Registry

    return Registry.load().substitutions()


def from_env(framework: str, mode: str | None, table: Table | None = None) -> tuple[str, ...]:
    """The substitutions `framework`'s switch asks for, among those in `table` (default: the
    registry's); SR181 for an unknown name, or for any substitution while the adapter is in
    shadow mode (shadow never changes what runs)."""
    variable = SWITCHES[framework]
    text = os.environ.get(variable, "")
    if not text.strip():
        return ()
    names, problems = parse(text, registry_table() if table is None else table, framework)
    if names and mode == "shadow":
        adapter = variable.removesuffix("_SUBSTITUTE")
        problems.append(problem(
            "SR181", f"{variable}={text!r} asks specreg to run in place of "
            f"{_FRAMEWORK_NAMES[framework]}'s kernels, but {adapter}=shadow never changes what "
            f"{_FRAMEWORK_NAMES[framework]} runs",
            accepted=f"{adapter}=enforce with {variable}, or shadow without it",
            fix=f"export {adapter}=enforce, or unset {variable}", field=variable,
        ))
    if problems:
        raise ConfigError(problems)
    return names


def install_all(
    framework: str, names: tuple[str, ...], plan: Any = None, table: Table | None = None
) -> tuple[str, ...]:
    """Install each named substitution of `table` (default: the registry's) not yet installed in
    this process; returns `active()`.

    `plan` is the adapter's plan when it has one (None at plugin-load time: installers then read
    what they need from the framework's own arguments when the framework calls them)."""
    fresh = [n for n in names if n not in INSTALLED]
    if fresh and table is None:
        table = registry_table()
    for name in fresh:
        substitution = table[name]  # type: ignore[index]
        install = installer_of(framework, substitution)
        install(plan)
        INSTALLED[name] = substitution.where
    if fresh:
        logger.warning(
            "specreg: pid %d: %s runtime substitutions active: %s",
            os.getpid(), _FRAMEWORK_NAMES[framework], ", ".join(active()),
        )
    return active()


def installer_of(framework: str, substitution: Substitution) -> Callable[[Any], None]:
    """The substitution's installer, imported here when it is a ``"module:function"`` string;
    SR182 naming it when that import fails."""
    if not isinstance(substitution.installer, str):
        return substitution.installer
    module_name, _, function = substitution.installer.partition(":")
    try:
        return getattr(importlib.import_module(module_name), function)  # type: ignore[no-any-return]
    except (ImportError, AttributeError) as exc:
        raise seam_missing(framework, substitution.installer, exc) from exc


def active() -> tuple[str, ...]:
    """The substitutions installed in this process, sorted."""
    return tuple(sorted(INSTALLED))


def seam_missing(framework: str, seam: str, exc: BaseException | None = None) -> PluginError:
    """SR182: the framework has no `seam` (a dotted name) where the substitution needs it."""
    why = f" ({type(exc).__name__}: {exc})" if exc is not None else ""
    return PluginError(problem(
        "SR182", f"{_FRAMEWORK_NAMES.get(framework, framework)} {_version(framework)} has no "
        f"{seam}{why}; specreg's runtime substitution needs it",
        accepted=f"a {_FRAMEWORK_NAMES.get(framework, framework)} release with {seam}",
        fix=f"install the tested release, or unset {SWITCHES.get(framework, 'the substitution')}",
        field=seam,
    ))


def require_applied(framework: str, seam: str, current: Any, expected: Any) -> None:
    """SR182 unless the framework's `seam` now holds `expected` (a hook that was not applied)."""
    if current is expected:
        return
    raise PluginError(problem(
        "SR182", f"{seam} is still {_describe(current)} after specreg's substitution; "
        f"{_FRAMEWORK_NAMES.get(framework, framework)} did not apply the hook",
        accepted=f"{seam} replaced by specreg's {_describe(expected)}",
        fix=f"check for another plugin patching {seam}, or unset "
        f"{SWITCHES.get(framework, 'the substitution')}",
        field=seam,
    ))


def _describe(value: Any) -> str:
    return getattr(value, "__qualname__", None) or repr(value)


def _version(framework: str) -> str:
    try:
        return getattr(importlib.import_module(framework), "__version__", "?")
    except ImportError:
        return "(not installed)"
