"""The documentation is generated from the code where it can drift, and builds strictly."""

import inspect
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specreg import hookspecs
from tools import docgen

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"


@pytest.mark.parametrize("rel", sorted(docgen.all_pages()))
def test_generated_page_is_current(rel):
    expected = docgen.all_pages()[rel]
    path = DOCS / rel
    assert path.exists(), f"{rel} is missing: run `python tools/docgen.py docs`"
    assert path.read_text(encoding="utf-8") == expected, (
        f"{rel} is stale: run `python tools/docgen.py docs`"
    )


def test_no_stale_error_pages():
    generated = {Path(rel).name for rel in docgen.error_pages()}
    present = {p.name for p in (DOCS / "errors").glob("*.md")}
    assert present == generated


def test_the_error_catalogs_columns_are_explained():
    """Every column of the catalog's table is named, and the intro says what the marked rows
    are, naming each; "seed" (a random seed, elsewhere in the docs) is not used for it."""
    page = (DOCS / "errors" / "index.md").read_text(encoding="utf-8")
    intro, table = page.split("| code |", 1)
    header = [cell.strip() for cell in ("| code |" + table).splitlines()[0].strip("|").split("|")]
    assert header == ["code", "title", "first code"]
    marked = [line.split("](")[0].strip("| [") for line in table.splitlines()
              if line.rstrip().endswith("| first |")]
    assert marked == ["SR100", "SR300", "SR400"]
    assert "*first code*" in intro and all(f"[{code}]" in intro for code in marked)
    assert "seed" not in intro.lower() and "| seed |" not in page


def test_every_hook_is_documented_with_its_exact_signature():
    page = (DOCS / "reference" / "hooks.md").read_text(encoding="utf-8")
    names = [n for n, _ in docgen.hook_functions()]
    assert len(names) == 13
    for name, func in docgen.hook_functions():
        params = ", ".join(inspect.signature(func).parameters)
        assert f"`{name}({params})`" in page, name
        assert f"def {name}{inspect.signature(func)}" in page, name


def test_hooks_page_lists_only_real_hooks():
    page = (DOCS / "reference" / "hooks.md").read_text(encoding="utf-8")
    documented = {line[4:].strip("`") for line in page.splitlines() if line.startswith("## `")}
    assert documented == {n for n in dir(hookspecs) if n.startswith("specreg_")}


def test_hooks_page_documents_the_per_step_contract():
    from specreg.contract import protocols

    page = (DOCS / "reference" / "hooks.md").read_text(encoding="utf-8")
    for cls in (protocols.VerifyResult, *protocols.VERIFIER_PROTOCOLS.values(),
                *protocols.DRAFTER_PROTOCOLS.values(), protocols.CacheSwapperProtocol):
        assert f"### `{cls.__name__}`" in page, cls.__name__
    for name in protocols.protocol_members(protocols.TreeDrafterProtocol):
        assert f"def {name}(" in page or f"{name}: " in page, name


def test_docgen_names_no_shipped_plugin():
    import ast

    plugins = {p.name for p in (ROOT / "plugins").iterdir() if (p / "__init__.py").exists()}
    names = {p.removeprefix("specreg_") for p in plugins} | plugins
    for module in ("tools/docgen.py", "specreg/cli/demo.py", "specreg/cli/demo_args.py",
                   "specreg/testing/conformance.py"):
        tree = ast.parse((ROOT / module).read_text(encoding="utf-8"))
        strings = {n.value.lower() for n in ast.walk(tree)
                   if isinstance(n, ast.Constant) and isinstance(n.value, str)}
        named = {s for s in strings for name in names if name in s.split()}
        named |= {s for s in strings if s in names}
        assert not named, (module, named)


def test_tutorial_page_is_the_example_readme():
    tutorial = (DOCS / "writing-plugins.md").read_text(encoding="utf-8")
    readme = (ROOT / "examples" / "specreg-ngram" / "README.md").read_text(encoding="utf-8")
    assert docgen.site_links(readme.strip()) in tutorial


def test_mkdocs_build_strict(tmp_path):
    mkdocs = shutil.which("mkdocs")
    assert mkdocs, "mkdocs is part of the docs extra: pip install -e '.[docs]'"
    result = subprocess.run(
        [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(tmp_path / "site")],
        cwd=ROOT,
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
