"""The house's shape: the architecture page's picture and table are current, the core stands on
at most ten floors with at most ten modules at its root, and no module passes 400 lines."""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

from tools import architecture

ROOT = Path(__file__).resolve().parents[2]
MAX_FLOORS = 10
MAX_ROOT_MODULES = 10
MAX_LINES = 400


def test_the_picture_is_drawn_from_todays_imports():
    committed = architecture.PICTURE.read_text(encoding="utf-8")
    assert committed == architecture.svg(), "docs/img/wings.svg is stale: run `python tools/architecture.py`"


def test_the_table_is_drawn_from_todays_imports():
    committed = architecture.PAGE.read_text(encoding="utf-8")
    assert architecture.START in committed and architecture.END in committed
    assert committed == architecture.page(committed), (
        "the table on docs/architecture.md is stale: run `python tools/architecture.py`"
    )


def test_every_wing_states_its_job():
    for room in architecture.floors():
        assert architecture.job(room), f"{room} has no docstring stating its job"


def test_the_core_stands_on_at_most_ten_floors():
    floors = architecture.floors()
    assert architecture.core_floors() <= MAX_FLOORS, sorted(floors.items(), key=lambda kv: -kv[1])


def test_floors_count_the_longest_chain_and_refuse_a_circle():
    """Negative controls on hand-made graphs: a chain of three stands on three floors, and a
    circle is refused instead of given floors."""
    assert architecture.floors({"a": {"b"}, "b": {"c"}, "c": set(), "d": {"c"}}) == {
        "a": 3, "b": 2, "c": 1, "d": 2,
    }
    with pytest.raises(ValueError, match="circle"):
        architecture.floors({"a": {"b"}, "b": {"a"}})


def test_the_reduction_keeps_only_arrows_no_longer_path_implies():
    graph = {"a": {"b", "c"}, "b": {"c"}, "c": set()}
    assert architecture.reduced(graph) == {"a": {"b"}, "b": {"c"}, "c": set()}


def test_the_root_keeps_at_most_ten_modules():
    modules = sorted(p.name for p in (ROOT / "specreg").glob("*.py"))
    assert len(modules) <= MAX_ROOT_MODULES, modules


@pytest.mark.parametrize("package", ["specreg", "plugins"])
def test_no_module_passes_400_lines(package):
    long = {str(p.relative_to(ROOT)): n for p in sorted((ROOT / package).rglob("*.py"))
            if (n := len(p.read_text(encoding="utf-8").splitlines())) > MAX_LINES}
    assert not long, long


BUILT_IN_PACKAGES = sorted(p.name for p in (ROOT / "plugins").iterdir() if (p / "__init__.py").exists())


def _plugin_names_in_code(source: str) -> set[str]:
    """Built-in plugin packages named by a string in `source` that is not a docstring."""
    tree = ast.parse(source)
    docstrings = {id(node.body[0].value) for node in ast.walk(tree)
                  if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef))
                  and node.body and isinstance(node.body[0], ast.Expr)
                  and isinstance(node.body[0].value, ast.Constant)}
    return {package for node in ast.walk(tree)
            if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in docstrings
            for package in BUILT_IN_PACKAGES if package in node.value}


def test_the_core_looks_up_no_plugin_by_name():
    """The core reaches a plugin only through what the plugin registers (hooks, entry points),
    never by a string naming its package (`import_module("specreg_eagle.kernels...")`)."""
    named = {str(p.relative_to(ROOT)): found for p in sorted((ROOT / "specreg").rglob("*.py"))
             if (found := _plugin_names_in_code(p.read_text(encoding="utf-8")))}
    assert not named, named


def test_a_string_named_plugin_lookup_is_caught():
    """Negative control: a planted lookup is found; the same name in a docstring is not."""
    planted = 'import importlib\n\ndef f():\n    """specreg_eagle in prose."""\n    ' \
              'return importlib.import_module("specreg_eagle.kernels")\n'
    assert _plugin_names_in_code(planted) == {"specreg_eagle"}
    assert _plugin_names_in_code('"""specreg_eagle in prose."""\n') == set()
