"""Discovery and load isolation (specreg/registry/loading.py), without installing anything: the
allowlist and timeout variables as read, and one entry point's import turned into a plugin or a
coded failure (SR110 raised, SR118 hung), never an exception that takes the others down."""

from __future__ import annotations

import importlib.metadata
import sys
import types

import pytest

from specreg.registry.loading import (
    DEFAULT_IMPORT_TIMEOUT,
    IMPORT_TIMEOUT_ENV,
    import_entry_point,
    parse_allowlist,
    timeout_from_env,
)


@pytest.mark.parametrize(
    "value, expected",
    [(None, None), ("", frozenset()), ("a, b,,a", frozenset({"a", "b"})), (" eagle ", {"eagle"})],
)
def test_allowlist_text(value, expected):
    assert parse_allowlist(value) == expected


@pytest.mark.parametrize(
    "value, expected",
    [(None, DEFAULT_IMPORT_TIMEOUT), ("2.5", 2.5), ("soon", DEFAULT_IMPORT_TIMEOUT),
     ("0", DEFAULT_IMPORT_TIMEOUT), ("-3", DEFAULT_IMPORT_TIMEOUT)],
)
def test_import_timeout_variable(monkeypatch, value, expected):
    if value is None:
        monkeypatch.delenv(IMPORT_TIMEOUT_ENV, raising=False)
    else:
        monkeypatch.setenv(IMPORT_TIMEOUT_ENV, value)
    assert timeout_from_env() == expected


def _entry_point(monkeypatch, name: str, body: str) -> importlib.metadata.EntryPoint:
    module = f"_specreg_test_{name}"
    monkeypatch.delitem(sys.modules, module, raising=False)
    loader = types.ModuleType(module)
    exec(body, loader.__dict__)  # noqa: S102 - the test's own module body
    monkeypatch.setitem(sys.modules, module, loader)
    return importlib.metadata.EntryPoint(name=name, value=f"{module}:plugin", group="specreg")


def test_a_plugin_that_imports_is_handed_back(monkeypatch):
    failures = []
    ok, plugin = import_entry_point(
        _entry_point(monkeypatch, "good", "plugin = 'the plugin'"), 5, lambda *a, **k: failures.append(a)
    )
    assert (ok, plugin, failures) == (True, "the plugin", [])


def test_a_plugin_that_raises_is_sr110_with_its_traceback(monkeypatch):
    failures = []
    ep = _entry_point(monkeypatch, "raiser", "def __getattr__(name):\n    raise RuntimeError('boom')")
    ok, plugin = import_entry_point(ep, 5, lambda *a, **k: failures.append((a, k)))
    assert (ok, plugin) == (False, None)
    ((name, dist, found), extra), = failures
    assert (name, dist, found.code) == ("raiser", None, "SR110")
    assert "RuntimeError: boom" in found.message and "boom" in extra["detail"]


def test_a_plugin_that_hangs_is_sr118_and_does_not_hold_the_caller(monkeypatch):
    failures = []
    ep = _entry_point(
        monkeypatch, "hang",
        "import threading\n_never = threading.Event()\n"
        "def __getattr__(name):\n    _never.wait(30)\n",
    )
    ok, _ = import_entry_point(ep, 0.2, lambda *a, **k: failures.append(a))
    assert not ok and [f[2].code for f in failures] == ["SR118"]
    assert "did not finish importing within 0.2 s" in failures[0][2].message
