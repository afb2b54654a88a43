"""Discovers plugins through entry points and imports each in isolation (a failure or a hang is
recorded, never fatal to the others).

`import_entry_point` runs one plugin's import in a daemon thread bounded by the import timeout
and turns any failure into a coded problem (SR110 raised, SR118 timed out); `SPECREG_PLUGINS`
(an allowlist) and `SPECREG_PLUGIN_IMPORT_TIMEOUT` are read here.
"""

from __future__ import annotations

import importlib.metadata
import os
import threading
import traceback
from collections.abc import Callable
from typing import Any

import attrs

from specreg.errors import Problem, problem

ENTRY_POINT_GROUP = "specreg"
ALLOWLIST_ENV = "SPECREG_PLUGINS"
IMPORT_TIMEOUT_ENV = "SPECREG_PLUGIN_IMPORT_TIMEOUT"
DEFAULT_IMPORT_TIMEOUT = 60.0


@attrs.frozen(kw_only=True)
class PluginFailure:
    """A plugin that was skipped, or a registration that was refused, and why."""

    plugin: str
    distribution: str | None
    problem: Problem
    detail: str = ""

    def to_dict(self) -> dict[str, Any]:
        return {
            "plugin": self.plugin,
            "distribution": self.distribution,
            "code": self.problem.code,
            "message": self.problem.render(),
            "detail": self.detail,
        }


#: How a loader records a failure: (plugin, distribution, problem, detail=traceback text).
Fail = Callable[..., None]


def parse_allowlist(value: str | None) -> frozenset[str] | None:
    """SPECREG_PLUGINS: unset -> None (load all); '' -> nothing; 'a,b' -> {a, b}."""
    if value is None:
        return None
    return frozenset(part.strip() for part in value.split(",") if part.strip())


def timeout_from_env() -> float:
    """SPECREG_PLUGIN_IMPORT_TIMEOUT in seconds; the default when unset, unreadable or <= 0."""
    raw = os.environ.get(IMPORT_TIMEOUT_ENV, "").strip()
    try:
        value = float(raw) if raw else DEFAULT_IMPORT_TIMEOUT
    except ValueError:
        value = DEFAULT_IMPORT_TIMEOUT
    return value if value > 0 else DEFAULT_IMPORT_TIMEOUT


def entry_points(group: str) -> list[importlib.metadata.EntryPoint]:
    """The group's entry points, sorted by name."""
    return sorted(importlib.metadata.entry_points(group=group), key=lambda e: e.name)


def distribution_of(ep: importlib.metadata.EntryPoint) -> tuple[str | None, str | None]:
    """(distribution name, version) of the package that declares `ep`, when known."""
    dist = getattr(ep, "dist", None)
    return (dist.metadata["Name"], dist.version) if dist is not None else (None, None)


def import_entry_point(
    ep: importlib.metadata.EntryPoint, timeout: float, fail: Fail
) -> tuple[bool, Any]:
    """(True, the plugin object) or (False, None) after recording SR118 or SR110 with `fail`."""
    dist_name, _ = distribution_of(ep)
    try:
        return True, _load_with_timeout(ep, timeout)
    except TimeoutError:
        fail(
            ep.name,
            dist_name,
            problem(
                "SR118",
                f"plugin {ep.name!r} ({dist_name or 'unknown distribution'}) did not "
                f"finish importing within {timeout:g} s",
                accepted=f"imports that finish within {IMPORT_TIMEOUT_ENV} seconds",
                fix=f"find what the plugin's import waits on, raise "
                f"{IMPORT_TIMEOUT_ENV}, or leave it out of {ALLOWLIST_ENV}",
            ),
        )
    except BaseException as exc:  # noqa: BLE001 - isolate every plugin failure
        if isinstance(exc, (KeyboardInterrupt, SystemExit)):
            raise
        fail(
            ep.name,
            dist_name,
            problem(
                "SR110",
                f"plugin {ep.name!r} ({dist_name or 'unknown distribution'}) failed "
                f"to import: {type(exc).__name__}: {exc}",
                fix=f"reinstall or remove {dist_name or ep.value}, or leave it out "
                f"of {ALLOWLIST_ENV}",
            ),
            detail=traceback.format_exc(limit=5),
        )
    return False, None


def _load_with_timeout(ep: importlib.metadata.EntryPoint, timeout: float) -> Any:
    """`ep.load()` in a daemon thread, so a hanging import cannot stall every other plugin.

    A timed-out import keeps running in its thread (Python cannot stop it); the plugin is
    skipped and reported.
    """
    outcome: dict[str, Any] = {}

    def target() -> None:
        try:
            outcome["value"] = ep.load()
        except BaseException as exc:  # noqa: BLE001 - re-raised in the caller's thread
            outcome["error"] = exc

    thread = threading.Thread(target=target, name=f"specreg-import-{ep.name}", daemon=True)
    thread.start()
    thread.join(timeout)
    if thread.is_alive():
        raise TimeoutError(ep.name)
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def own_version() -> str | None:
    """The installed specreg's version, when it is installed."""
    try:
        return importlib.metadata.version("specreg")
    except importlib.metadata.PackageNotFoundError:
        return None
