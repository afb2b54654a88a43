"""Installs, once per framework process, the runtime substitutions an adapter's switch turns on.

`from_env` reads `SPECREG_SGLANG_SUBSTITUTE` / `SPECREG_VLLM_SUBSTITUTE` (`specreg.contract.substitutions`
holds the names); `install_all` imports each substitution's installer inside the framework's
process, calls it, and logs one line per process saying what is active; `active()` answers the
same from inside that process. Installers use `seam_missing` and `require_applied` so that a seam
the framework moved, or a hook it did not apply, stops start-up with SR182 instead of leaving the
framework's own kernel running.

The record of what is installed is per process because the patches are: `INSTALLED` holds it.
"""

from __future__ import annotations

import importlib
import logging
import os
from typing import Any

from specreg.errors import ConfigError, PluginError, problem
from specreg.contract.substitutions import SUBSTITUTIONS, SWITCHES, parse

logger = logging.getLogger("specreg.adapters")

_FRAMEWORK_NAMES = {"sglang": "SGLang", "vllm": "vLLM"}

#: Substitution name -> the installer that applied it in this process (the patches are global).
INSTALLED: dict[str, str] = {}


def from_env(framework: str, mode: str | None) -> tuple[str, ...]:
    """The substitutions `framework`'s switch asks for; SR181 for an unknown name, or for any
    substitution while the adapter is in shadow mode (shadow never changes what runs)."""
    variable = SWITCHES[framework]
    text = os.environ.get(variable, "")
    names, problems = parse(text, framework)
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


def install_all(framework: str, names: tuple[str, ...], plan: Any = None) -> tuple[str, ...]:
    """Install each named substitution not yet installed in this process; returns `active()`.

    `plan` is the adapter's plan when it has one (None at plugin-load time: installers then read
    what they need from the framework's own arguments when the framework calls them)."""
    fresh = [n for n in names if n not in INSTALLED]
    for name in fresh:
        substitution = SUBSTITUTIONS[name]
        module_name, _, function = substitution.installer.partition(":")
        try:
            install = getattr(importlib.import_module(module_name), function)
        except (ImportError, AttributeError) as exc:
            raise seam_missing(framework, substitution.installer, exc) from exc
        install(plan)
        INSTALLED[name] = substitution.installer
    if fresh:
        logger.warning(
            "specreg: pid %d: %s runtime substitutions active: %s",
            os.getpid(), _FRAMEWORK_NAMES[framework], ", ".join(active()),
        )
    return active()


def plugin_module(plugin: str, submodule: str) -> Any:
    """`submodule` of the shipped plugin registered as `plugin` in the `specreg` entry-point
    group, found as the registry finds plugins (specreg's core never imports a shipped plugin
    by name). ImportError when no such plugin is installed."""
    from importlib.metadata import entry_points

    found = [ep for ep in entry_points(group="specreg") if ep.name == plugin]
    if not found:
        raise ImportError(f"no {plugin!r} plugin in the 'specreg' entry-point group")
    package = found[0].module.rsplit(".", 1)[0] if "." in found[0].module else found[0].module
    return importlib.import_module(f"{package}.{submodule}")


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
