"""The documentation is generated from the code where it can drift, and builds strictly."""

import inspect
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from specreg import docgen, hookspecs

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"


@pytest.mark.parametrize("rel", sorted(docgen.all_pages()))
def test_generated_page_is_current(rel):
    expected = docgen.all_pages()[rel]
    path = DOCS / rel
    assert path.exists(), f"{rel} is missing: run `python -m specreg.docgen docs`"
    assert path.read_text(encoding="utf-8") == expected, (
        f"{rel} is stale: run `python -m specreg.docgen docs`"
    )


def test_no_stale_error_pages():
    generated = {Path(rel).name for rel in docgen.error_pages()}
    present = {p.name for p in (DOCS / "errors").glob("*.md")}
    assert present == generated


def test_every_hook_is_documented_with_its_exact_signature():
    page = (DOCS / "reference" / "hooks.md").read_text(encoding="utf-8")
    names = [n for n, _ in docgen.hook_functions()]
    assert len(names) == 10
    for name, func in docgen.hook_functions():
        params = ", ".join(inspect.signature(func).parameters)
        assert f"`{name}({params})`" in page, name
        assert f"def {name}{inspect.signature(func)}" in page, name


def test_hooks_page_lists_only_real_hooks():
    page = (DOCS / "reference" / "hooks.md").read_text(encoding="utf-8")
    documented = {line[4:].strip("`") for line in page.splitlines() if line.startswith("## `")}
    assert documented == {n for n in dir(hookspecs) if n.startswith("specreg_")}


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
