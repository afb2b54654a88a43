"""Every built-in plugin and the example follow the one documented plugin shape (#14).

The shape (docs/writing-plugins.md, "The shape of a plugin"): `plugin.py` holds the hooks and
imports no torch; `errors.py` the catalog entries; `checkpoint.py` reads a draft model's config,
where there is one; `sizes.py` states what a resolved config implies; `kernels/<family>/`
holds `reference.py`, `torch_impl.py`, (`triton_impl.py`), `__init__.py`, and optionally
`types.py`, `checks.py` and a compiled CPU path (`numba_impl.py`, `numba_kernels.py`); `verifier.py`, `drafter.py`, `swapper.py` are the plan's objects;
a module too long for one job splits into named parts beside it (`checkpoint_reader.py`,
`swapper_checks.py`, ...); `sglang_seam.py` is the plugin's SGLang runtime substitution;
`suffix_tree.py` and `heads.py` hold a drafter's own data structure or draft model.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PACKAGES = {
    "specreg_eagle": ROOT / "plugins" / "specreg_eagle",
    "specreg_dspark": ROOT / "plugins" / "specreg_dspark",
    "specreg_hisparse": ROOT / "plugins" / "specreg_hisparse",
    "specreg_draft_model": ROOT / "plugins" / "specreg_draft_model",
    "specreg_medusa": ROOT / "plugins" / "specreg_medusa",
    "specreg_lookup": ROOT / "plugins" / "specreg_lookup",
    "specreg_ngram": ROOT / "examples" / "specreg-ngram" / "specreg_ngram",
}
TOP_LEVEL = {
    "__init__.py", "plugin.py", "errors.py", "checkpoint.py", "sizes.py",
    "verifier.py", "drafter.py", "swapper.py", "suffix_tree.py", "heads.py",
    # a module past 400 lines splits by job into <module>_<job>.py parts beside it
    "checkpoint_reader.py", "checkpoint_layout.py", "swapper_state.py", "swapper_checks.py",
    "suffix_tree_nodes.py",
    # a plugin's own framework seam, registered through specreg_register_substitutions
    "sglang_seam.py", "vllm_seam.py",
}
FAMILY_REQUIRED = {"__init__.py", "reference.py", "torch_impl.py"}
#: `numba_impl.py` with its compiled passes `numba_kernels.py`: an optional compiled CPU path
#: (numba, the `cpu` extra), with the torch path as its fallback.
FAMILY_OPTIONAL = {
    "triton_impl.py", "types.py", "checks.py", "numba_impl.py", "numba_kernels.py",
}
#: The core's kernels also hold what several families share: the Triton import, tensor checks,
#: the CPU row chunks, the one exp and log of the torch path, and the two-level race (torch,
#: Triton tiles, and compiled for the CPU: `race_numba`, imported only by the compiled paths), and
#: the compiled paths' lazy import and row views (`numba_rows`). They belong to no family, so any
#: family may import them.
CORE_KERNEL_SHARED = {
    "triton_shim.py", "checks.py", "row_chunks.py", "exp_log.py", "block_race.py", "race_tiles.py",
    "race_numba.py", "numba_rows.py",
}
#: The built-ins and the core have kernels; the example has none (it drafts by lookup), but any it
#: gains are held to the same shape.
KERNEL_ROOTS = [
    ROOT / "specreg" / "kernels",
    *(PACKAGES[name] / "kernels" for name in (
        "specreg_eagle", "specreg_dspark", "specreg_hisparse", "specreg_lookup"
    )),
    *(root for root in [PACKAGES["specreg_ngram"] / "kernels"] if root.exists()),
]


def _modules(folder: Path) -> set[str]:
    return {p.name for p in folder.iterdir() if p.suffix == ".py"}


def _imports(path: Path) -> set[str]:
    """Top-level module names imported at module level (not inside functions or TYPE_CHECKING)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: set[str] = set()
    for node in tree.body:
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module.split(".")[0])
    return found


def _families(root: Path) -> list[Path]:
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name != "__pycache__")


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_plugin_has_only_the_documented_top_level_modules(name):
    package = PACKAGES[name]
    modules = _modules(package)
    assert {"__init__.py", "plugin.py"} <= modules, f"{name} lacks plugin.py"
    assert modules <= TOP_LEVEL, f"{name} has modules outside the shape: {sorted(modules - TOP_LEVEL)}"
    folders = {p.name for p in package.iterdir() if p.is_dir() and p.name != "__pycache__"}
    assert folders <= {"kernels"}, f"{name} has folders outside the shape: {sorted(folders)}"


@pytest.mark.parametrize("name", sorted(PACKAGES))
def test_plugin_module_imports_no_torch(name):
    for module in ("plugin.py", "__init__.py"):
        imported = _imports(PACKAGES[name] / module)
        assert not imported & {"torch", "triton", "numpy"}, f"{name}/{module} imports {imported}"


@pytest.mark.parametrize("root", KERNEL_ROOTS, ids=lambda p: str(p.relative_to(ROOT)))
def test_every_kernel_family_has_the_family_files(root):
    shared = {"__init__.py"} | (CORE_KERNEL_SHARED if root == ROOT / "specreg" / "kernels" else set())
    assert _modules(root) == shared, f"{root} holds modules outside a family"
    families = _families(root)
    assert families, f"{root} has no kernel family"
    for family in families:
        modules = _modules(family)
        missing = FAMILY_REQUIRED - modules
        extra = modules - FAMILY_REQUIRED - FAMILY_OPTIONAL
        assert not missing, f"{family.relative_to(ROOT)} lacks {sorted(missing)}"
        assert not extra, f"{family.relative_to(ROOT)} holds {sorted(extra)} outside the shape"


def _all_source_files() -> list[Path]:
    files = sorted((ROOT / "specreg").rglob("*.py"))
    for package in PACKAGES.values():
        files += sorted(package.rglob("*.py"))
    return [f for f in files if "__pycache__" not in f.parts]


@pytest.mark.parametrize("path", _all_source_files(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_module_opens_with_its_job(path):
    if path.name == "__main__.py":
        return
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8")))
    assert doc and doc.strip(), f"{path.relative_to(ROOT)} has no opening docstring"
    first = " ".join(doc.strip().split("\n\n")[0].split())
    assert first.endswith((".", ":")) and len(first) <= 320, (
        f"{path.relative_to(ROOT)}: the docstring does not open with one sentence: {first!r}"
    )


#: The most lines a module under specreg/ may hold: past it, it holds more than one job.
MAX_CORE_LINES = 400


def test_no_module_under_specreg_exceeds_the_line_limit():
    long = {
        str(path.relative_to(ROOT)): n
        for path in sorted((ROOT / "specreg").rglob("*.py"))
        if (n := len(path.read_text(encoding="utf-8").splitlines())) > MAX_CORE_LINES
    }
    assert not long, f"split by job: {long}"


def test_reference_modules_are_used_by_tests_only():
    """A reference is the oracle: no implementation imports one."""
    offenders = []
    for path in _all_source_files():
        if path.name == "reference.py" or "testing" in path.relative_to(ROOT).parts:
            continue
        tree = ast.parse(path.read_text(encoding="utf-8"))
        for node in ast.walk(tree):
            if isinstance(node, ast.ImportFrom):
                names = [node.module or ""] + [a.name for a in node.names]
                if any(n == "reference" or n.endswith(".reference") for n in names):
                    offenders.append(str(path.relative_to(ROOT)))
    assert not offenders, f"implementations import a reference: {offenders}"


def test_one_triton_import_shim():
    importers = [
        str(p.relative_to(ROOT)) for p in _all_source_files()
        if "triton" in _imports(p) and p.name != "triton_shim.py"
    ]
    assert not importers, f"import triton through specreg.kernels.triton_shim: {importers}"
