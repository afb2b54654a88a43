"""The public face that users and frameworks import stays where it is, whatever moves behind it:
`specreg`'s names, the console script, `python -m specreg`, the pytest plugin, the framework
entry points and the built-in plugins' entry points. Each is checked through the installed
distribution's metadata and a real import, not through the source tree's layout."""

from __future__ import annotations

import importlib
import importlib.metadata
import importlib.util
import runpy
import subprocess
import sys

import pytest

import specreg

#: What `from specreg import ...` offers, pinned: a name leaves only by a deliberate change here.
PUBLIC_NAMES = {
    "AlgorithmSpec", "Candidate", "CacheMissError", "CacheSpec", "ConfigError", "ConsistencyError",
    "KernelInputError", "ParamRange", "Phase", "PluginError", "PluginFailure", "PluginInfo",
    "Problem", "Registry", "RegistryCache", "Resolution", "SpecConfig", "SpecPlan", "SpecRegError",
    "Sizes", "UnknownNameError", "UnknownPhaseError", "VerifyResult", "config_from_flags",
    "hookimpl", "hookspec", "problem", "resolve_num_tokens_per_req",
}
#: (entry-point group, name) -> the object it must load, as users and frameworks find it.
ENTRY_POINTS = {
    ("console_scripts", "specreg"): "specreg.cli.command:main",
    ("pytest11", "specreg"): "specreg.testing.pytest_plugin",
    ("sglang.srt.plugins", "specreg"): "specreg.adapters.sglang:load",
    ("vllm.general_plugins", "specreg"): "specreg.adapters.vllm:load",
}
BUILT_IN_PLUGINS = {"eagle", "dspark", "hisparse", "draft_model", "medusa", "lookup"}


def _entry_point(group: str, name: str) -> importlib.metadata.EntryPoint:
    found = [ep for ep in importlib.metadata.entry_points(group=group, name=name)
             if ep.dist is not None and ep.dist.name == "specreg"]
    assert len(found) == 1, (group, name, found)
    return found[0]


def test_the_package_exports_exactly_the_pinned_names():
    assert set(specreg.__all__) == PUBLIC_NAMES
    for name in PUBLIC_NAMES:
        assert getattr(specreg, name) is not None, name


@pytest.mark.parametrize(("group", "name"), sorted(ENTRY_POINTS))
def test_each_entry_point_loads_what_it_names(group, name):
    entry = _entry_point(group, name)
    assert entry.value == ENTRY_POINTS[group, name]
    loaded = entry.load()
    module, _, attr = entry.value.partition(":")
    assert loaded is (getattr(importlib.import_module(module), attr) if attr else importlib.import_module(module))


def test_the_built_in_plugins_are_entry_points_of_the_specreg_group():
    names = {ep.name for ep in importlib.metadata.entry_points(group="specreg")
             if ep.dist is not None and ep.dist.name == "specreg"}
    assert BUILT_IN_PLUGINS <= names, names
    for ep in importlib.metadata.entry_points(group="specreg"):
        if ep.name in BUILT_IN_PLUGINS:
            ep.load()


def test_python_dash_m_specreg_is_the_console_script():
    done = subprocess.run([sys.executable, "-m", "specreg", "--help"], capture_output=True,
                          text=True, check=False)
    assert done.returncode == 0, done.stderr
    assert "usage: specreg" in done.stdout


def test_the_package_main_module_runs_the_command(monkeypatch, capsys):
    main = importlib.util.find_spec("specreg.__main__").origin  # what `python -m specreg` runs
    monkeypatch.setattr(sys, "argv", ["specreg", "--help"])
    with pytest.raises(SystemExit) as exited:
        runpy.run_path(main, run_name="__main__")
    assert exited.value.code == 0
    assert "usage: specreg" in capsys.readouterr().out


def test_a_lost_name_is_caught(monkeypatch):
    """Negative control: a name dropped from `__all__` fails the pin."""
    monkeypatch.setattr(specreg, "__all__", [n for n in specreg.__all__ if n != "Registry"])
    with pytest.raises(AssertionError):
        test_the_package_exports_exactly_the_pinned_names()
