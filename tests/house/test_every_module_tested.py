"""Every module of specreg/ and plugins/ has its own test module, or is named in
`tests/support/tested_through.py` with the test that exercises it and why that is enough.

A module's own test module mirrors its place: `specreg/<wing>/<name>.py` is tested in
`tests/<wing>/test_<name>.py`, a module at specreg/'s root in `tests/ground/test_<name>.py`, and a
plugin's `plugins/specreg_<plugin>/<name>.py` in `tests/<plugin>/test_<name>.py`. A kernel family
is one unit, entered only through its `__init__`: every module of `kernels/<family>/` has its own
tests in `test_<family>.py` or `test_<family>_<aspect>.py` of its wing's test folder. A module
holding nothing but its docstring has nothing to test. A module named in the list must be
reached by the test it names: that test imports it, or imports a module that imports it.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

from tests.house.test_import_graph import GRAPH, MODULES, PACKAGES
from tests.support.tested_through import TESTED_THROUGH

ROOT = Path(__file__).resolve().parents[2]
TESTS = ROOT / "tests"


def own_tests(module: str) -> list[Path]:
    """The test modules that mirror `module`'s place (a glob for a kernel family's modules)."""
    path = MODULES[module]
    package = module.split(".")[0]
    parts = path.relative_to(PACKAGES[package] / package).with_suffix("").parts
    folder = TESTS / ("kernels" if package == "specreg" else package.removeprefix("specreg_"))
    if parts[0] == "kernels" and len(parts) > 2:
        family = parts[1]
        return sorted({*folder.glob(f"test_{family}.py"), *folder.glob(f"test_{family}_*.py")})
    if package == "specreg":
        folder = TESTS / ("ground" if len(parts) == 1 else parts[0])
    name = parts[-1] if parts[-1] != "__init__" else (parts[-2] if len(parts) > 1 else "plugin")
    own = folder / f"test_{name.lstrip('_')}.py"
    return [own] if own.exists() else []


def _only_a_docstring(path: Path) -> bool:
    body = ast.parse(path.read_text(encoding="utf-8")).body
    return len(body) == 1 and isinstance(body[0], ast.Expr) and isinstance(body[0].value, ast.Constant)


def _closure(names: set[str]) -> set[str]:
    seen: set[str] = set()
    todo = [n for n in names if n in GRAPH]
    while todo:
        name = todo.pop()
        if name not in seen:
            seen.add(name)
            todo.extend(GRAPH[name])
    return seen


def _test_imports(test: Path, seen: set[Path] | None = None) -> set[str]:
    """The specreg and plugin modules a test file imports (anywhere in it, or in the tests/
    helper modules it imports), each with its packages on the way, and those it names by their
    dotted name in a string (for a subprocess or a framework process to import), and those that
    the scripts it runs from its own folder import."""
    seen = set() if seen is None else seen
    seen.add(test)
    source = test.read_text(encoding="utf-8")
    found = {m for m in MODULES if f"{m}\"" in source or f"{m}'" in source or f"{m}:" in source}
    if '"-m", "specreg"' in source:  # runs the command in a subprocess
        found.add("specreg.__main__")
    for script in re.findall(r"[\"']([a-z_]+\.py)[\"']", source):  # a script it runs beside it
        helper = test.parent / script
        if helper.is_file() and helper not in seen:
            found |= _test_imports(helper, seen)
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            dotted = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            dotted = [f"{node.module}.{alias.name}" for alias in node.names] + [node.module]
        else:
            continue
        for name in dotted:
            parts = name.split(".")
            found |= {".".join(parts[:end]) for end in range(1, len(parts) + 1)} & set(MODULES)
            helper = ROOT.joinpath(*parts).with_suffix(".py")
            if parts[0] == "tests" and helper.is_file() and helper not in seen:
                found |= _test_imports(helper, seen)
    return found


UNTESTED = sorted(m for m in MODULES if not own_tests(m) and not _only_a_docstring(MODULES[m]))


def test_every_module_without_its_own_test_is_listed():
    missing = [str(MODULES[m].relative_to(ROOT))
               for m in UNTESTED if str(MODULES[m].relative_to(ROOT)) not in TESTED_THROUGH]
    assert not missing, "add a test module or a line to tests/support/tested_through.py:\n" + "\n".join(missing)


def test_the_list_names_no_module_that_has_its_own_test_or_is_gone():
    listed = set(TESTED_THROUGH)
    paths = {str(MODULES[m].relative_to(ROOT)): m for m in MODULES}
    gone = sorted(listed - set(paths))
    own = sorted(p for p in listed & set(paths) if own_tests(paths[p]))
    assert not gone and not own, {"gone": gone, "has its own test": own}


@pytest.mark.parametrize("path", sorted(TESTED_THROUGH))
def test_each_listed_module_is_reached_by_the_test_it_names(path):
    test, reason = TESTED_THROUGH[path]
    assert reason.strip(), path
    test_path = ROOT / test
    assert test_path.exists(), test
    module = next(m for m in MODULES if str(MODULES[m].relative_to(ROOT)) == path)
    assert module in _closure(_test_imports(test_path)), f"{test} does not import {module}, even indirectly"


def test_the_reach_check_rejects_a_test_that_does_not_import_the_module():
    """Negative control: a test file that imports only specreg.errors does not reach the chain
    kernels' Triton module."""
    assert "specreg.kernels.chain.triton_impl" not in _closure({"specreg.errors"})
    assert "specreg.kernels.chain.triton_impl" in _closure({"specreg.kernels.chain"}) or \
        "specreg.kernels.chain.triton_impl" in _closure({"specreg.step.chain_verifier"})
