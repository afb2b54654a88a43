"""The catalog is the single source: codes used in code exist, docs are generated from it."""

from __future__ import annotations

import re
import subprocess
import sys
from pathlib import Path

import pytest

from specreg import catalog
from specreg.cli.command import main
from specreg.registry.registry import Registry
from tests.support.cli import specreg

ROOT = Path(__file__).parents[2]
CODE_RE = re.compile(r"[\"'](SR\d{3})[\"']")


def _used_codes():
    used = {}
    for base in ("specreg", "plugins", "examples"):
        for path in (ROOT / base).rglob("*.py"):
            if "catalog" in path.parts:
                continue
            for code in CODE_RE.findall(path.read_text(encoding="utf-8")):
                used.setdefault(code, path)
    return used


def _declared_by_plugin(code: str, path: Path) -> bool:
    """A third-party code (SR500-SR899) whose ErrorEntry the plugin's package declares."""
    if int(code[2:]) not in catalog.PLUGIN_CODES:
        return False
    rel = path.relative_to(ROOT).parts
    distribution = ROOT.joinpath(*rel[:2]) if rel[0] == "examples" else path.parent
    return any(f'code="{code}"' in p.read_text(encoding="utf-8") for p in distribution.rglob("*.py"))


@pytest.fixture
def loaded():
    """The catalog of a loaded registry: the shipped plugins register their entries into it."""
    return Registry.load().catalog


def test_core_keeps_only_core_codes(loaded):
    """The core's catalog holds SR1xx and SR9xx; the shipped plugins own SR200-SR499."""
    core = catalog.core_entries()
    assert core and all(c[2] in "19" for c in core)
    shipped = set(loaded.builtin_entries()) - set(core)
    assert shipped and all(int(c[2:]) in catalog.SHIPPED_PLUGIN_CODES for c in shipped)


def test_explain_finds_a_shipped_plugin_code_in_a_fresh_process():
    done = subprocess.run(
        [sys.executable, "-m", "specreg", "explain", "SR200"],
        capture_output=True, text=True, check=False,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.startswith("SR200: EAGLE num_draft_tokens exceeds")


def test_every_code_used_in_code_is_in_the_catalog(loaded):
    entries = loaded.builtin_entries()
    missing = {
        code: str(path)
        for code, path in _used_codes().items()
        if code not in entries and not _declared_by_plugin(code, path)
    }
    assert not missing


def test_builtin_codes_stay_out_of_the_plugin_range(loaded):
    assert not [c for c in loaded.builtin_entries() if int(c[2:]) in catalog.PLUGIN_CODES]


def test_every_entry_is_complete(loaded):
    for entry in loaded.builtin_entries().values():
        assert entry.title and entry.meaning and entry.when, entry.code
        assert entry.solutions and all(s.strip() for s in entry.solutions), entry.code
        assert entry.example_fix.strip(), entry.code


def test_seed_failures_have_reserved_codes(loaded):
    seeds = {e.code for e in loaded.builtin_entries().values() if e.seed}
    assert seeds == {"SR100", "SR300", "SR400"}


def test_explain_prints_an_entry(capsys):
    assert main(["explain", "sr100"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("SR100: Unknown speculative phase")
    for heading in ("What it means", "When it happens", "Solutions", "Example fix"):
        assert heading in out


def test_explain_unknown_code(capsys):
    assert main(["explain", "SR1000"]) == 1
    assert "[SR153] no error code 'SR1000'" in capsys.readouterr().err


def test_explain_lists_every_code(capsys, loaded):
    assert main(["explain"]) == 0
    out = capsys.readouterr().out
    assert all(code in out for code in loaded.entries())


@pytest.mark.parametrize("bad", ["X100", "SR10", "sr100"])
def test_codes_have_one_shape(bad):
    with pytest.raises(ValueError):
        catalog.ErrorEntry(code=bad, title="t", meaning="m", when="w", solutions=["s"], example_fix="e")


def test_a_problem_checks_its_code_without_a_registry():
    """Core codes must be defined; plugin codes (SR200-SR899) only need their range, so a
    plugin's kernels raise coded errors before any registry exists."""
    from specreg.errors import problem

    assert problem("SR100", "m").code == "SR100"
    assert problem("SR250", "m").code == "SR250" and problem("SR777", "m").code == "SR777"
    undefined = next(f"SR{i}" for i in range(100, 200) if f"SR{i}" not in catalog.core_entries())
    for bad in (undefined, "SR099", "SR1000", "X100"):
        with pytest.raises(KeyError):
            problem(bad, "m")


def test_registries_do_not_share_plugin_entries():
    from specreg import hookimpl

    def plugin_with(title):
        class Errors:
            @hookimpl
            def specreg_register_errors(self, register):
                register(catalog.ErrorEntry(code="SR640", title=title, meaning="m", when="w",
                                            solutions=["s"], example_fix="e"))

        return Errors()

    first, second = Registry(), Registry()
    assert first.register_plugin(plugin_with("first"), "a") == "a"
    assert second.register_plugin(plugin_with("second"), "b") == "b"  # no clash across registries
    assert first.catalog.lookup("SR640").title == "first"
    assert second.catalog.lookup("SR640").title == "second"
    first.unregister_plugin("a")
    with pytest.raises(KeyError):
        first.catalog.lookup("SR640")  # gone with its plugin


def test_a_refused_plugin_keeps_none_of_its_entries():
    from specreg import hookimpl

    class HalfGood:
        @hookimpl
        def specreg_register_errors(self, register):
            register(catalog.ErrorEntry(code="SR641", title="t", meaning="m", when="w",
                                        solutions=["s"], example_fix="e"))
            register(catalog.ErrorEntry(code="SR150", title="t", meaning="m", when="w",
                                        solutions=["s"], example_fix="e"))

    registry = Registry()
    assert registry.register_plugin(HalfGood(), "half") is None
    assert [f.problem.code for f in registry.failures] == ["SR119"]
    assert "SR641" not in registry.catalog.entries()


def test_core_explain_and_suggestion():
    assert specreg("explain", "SR100").returncode == 0
    result = specreg("check", "--speculative-algorithm", "eaglee")
    assert result.returncode == 1 and "Did you mean 'eagle'" in result.stdout
