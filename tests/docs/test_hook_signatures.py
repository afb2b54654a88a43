"""Every hook signature the docs show is the code's (`specreg.hookspecs`), read back from the pages.

The hook reference (docs/reference/hooks.md) is parsed as a reader sees it: per hook section,
the **Signature:** line (argument names and collecting/firstresult) and the ``def`` line (names,
annotations and return annotation, read with `ast`) must equal `inspect.signature` of the
hookspec and its pluggy options, and no other section or stray ``def`` may show a hook. On every
other page (and the tutorial's source, the example's README), a hook written as a call in prose,
`` `specreg_make_drafter(config, algorithm, resolution, memo)` ``, names exactly the hookspec's
arguments, while an implementation in a code block (``def specreg_make_drafter(algorithm,
resolution):``) may take any subset of them, as pluggy allows, and no other name.
"""

from __future__ import annotations

import ast
import inspect
import re
from pathlib import Path

import pytest

from specreg import hookspecs

ROOT = Path(__file__).parents[2]
DOCS = ROOT / "docs"
HOOKS_PAGE = DOCS / "reference" / "hooks.md"
SPECS = {
    name: func for name, func in inspect.getmembers(hookspecs, inspect.isfunction)
    if name.startswith("specreg_")
}
HOOK = "|".join(sorted(SPECS, key=len, reverse=True))
#: Pages besides the hook reference that may show hooks.
OTHER_PAGES = sorted(
    [p for p in DOCS.rglob("*.md") if p != HOOKS_PAGE]
    + [ROOT / "README.md", ROOT / "examples" / "specreg-ngram" / "README.md"]
)


def _sections(page: str) -> dict[str, str]:
    """Second-level heading -> its text (a hook's heading is its name in backticks)."""
    parts = re.split(r"^## (.+)\n", page, flags=re.MULTILINE)
    return {title.strip("`"): body for title, body in zip(parts[1::2], parts[2::2], strict=True)}


def _fences(text: str) -> tuple[str, list[str]]:
    """(the text outside fenced code blocks, the blocks)."""
    blocks = re.findall(r"^```[^\n]*\n(.*?)^```", text, flags=re.MULTILINE | re.DOTALL)
    prose = re.sub(r"^```[^\n]*\n.*?^```", "", text, flags=re.MULTILINE | re.DOTALL)
    return prose, blocks


def _kind(func) -> str:
    return "firstresult" if func.specreg_spec["firstresult"] else "collecting"


def test_the_reference_documents_each_hook_once():
    page = HOOKS_PAGE.read_text(encoding="utf-8")
    sections = _sections(page)
    assert sorted(n for n in sections if n.startswith("specreg_")) == sorted(SPECS)
    assert len(SPECS) == 13
    stray = [n for n, body in sections.items() if not n.startswith("specreg_")
             and re.search(rf"^def ({HOOK})\(", body, flags=re.MULTILINE)]
    assert not stray, f"a hook's def outside its own section: {stray}"


@pytest.mark.parametrize("name", sorted(SPECS))
def test_the_references_signature_is_the_hookspecs(name):
    func, section = SPECS[name], _sections(HOOKS_PAGE.read_text(encoding="utf-8"))[name]
    code = inspect.signature(func)
    line = re.search(rf"\*\*Signature:\*\* `{name}\(([^)]*)\)` \((\w+)\)", section)
    assert line, f"{name}: no **Signature:** line"
    assert [a.strip() for a in line.group(1).split(",") if a.strip()] == list(code.parameters)
    assert line.group(2) == _kind(func)
    _, blocks = _fences(section)
    defs = [b for b in blocks if b.lstrip().startswith("def ")]
    assert len(defs) == 1, f"{name}: {len(defs)} def blocks"
    shown = ast.parse(defs[0].strip() + ": ...").body[0]
    assert isinstance(shown, ast.FunctionDef) and shown.name == name
    assert [a.arg for a in shown.args.args] == list(code.parameters)
    assert not (shown.args.kwonlyargs or shown.args.vararg or shown.args.kwarg)
    for arg, param in zip(shown.args.args, code.parameters.values(), strict=True):
        assert ast.literal_eval(arg.annotation) == param.annotation, (name, arg.arg)
    assert ast.literal_eval(shown.returns) == code.return_annotation, name


def _prose_calls(text: str) -> list[tuple[str, list[str]]]:
    prose, _ = _fences(text)
    return [(m.group(1), [a.strip() for a in m.group(2).split(",") if a.strip()])
            for m in re.finditer(rf"`({HOOK})\(([^)`]*)\)`", prose)]


def _implementations(text: str) -> list[tuple[str, list[str]]]:
    _, blocks = _fences(text)
    found = []
    for block in blocks:
        for m in re.finditer(rf"^\s*def ({HOOK})\(([^)]*)\)", block, flags=re.MULTILINE):
            found.append((m.group(1), [a.split(":")[0].split("=")[0].strip()
                                       for a in m.group(2).split(",") if a.strip()]))
    return found


@pytest.mark.parametrize("path", OTHER_PAGES, ids=lambda p: str(p.relative_to(ROOT)))
def test_other_pages_show_the_hooks_as_the_code_defines_them(path):
    text = path.read_text(encoding="utf-8")
    for name, args in _prose_calls(text):
        assert args == list(inspect.signature(SPECS[name]).parameters), (
            f"{path.name}: `{name}({', '.join(args)})` is not the hook's signature "
            f"{inspect.signature(SPECS[name])}"
        )
    for name, args in _implementations(text):
        unknown = set(args) - set(inspect.signature(SPECS[name]).parameters)
        assert not unknown, f"{path.name}: def {name} takes {sorted(unknown)}, not hook arguments"


def test_the_pages_do_show_hooks_both_ways():
    """The parse finds what it checks: the tutorial's prose calls and implementations, and
    a wrong signature in prose would be caught."""
    tutorial = (DOCS / "writing-plugins.md").read_text(encoding="utf-8")
    assert _prose_calls(tutorial) and len(_implementations(tutorial)) >= 4
    wrong = "`specreg_make_drafter(config, algorithm, resolution)` runs once per resolve"
    assert _prose_calls(wrong) == [("specreg_make_drafter", ["config", "algorithm", "resolution"])]
    assert _prose_calls(wrong)[0][1] != list(inspect.signature(SPECS["specreg_make_drafter"]).parameters)
