"""A plugin author's mistakes stop at `Registry.resolve()` with a coded error that `check`,
`plan`, `demo` and the conformance kit all report: each broken plugin is installed as a real
distribution (tests/support/author_mistakes.py) and the real CLI runs on it in a subprocess."""

from __future__ import annotations

import pytest

from specreg import Registry
from specreg.errors import SpecRegError
from specreg.testing import ConformanceError, check_algorithm
from tests.support.author_mistakes import ALGORITHM, MISTAKES, write_distribution
from tests.support.cli import specreg

BROKEN = [name for name, mistake in MISTAKES.items() if mistake.code is not None]


@pytest.fixture(scope="module")
def sites(tmp_path_factory) -> dict[str, tuple[str, str]]:
    """Each mistake's plugin installed in a folder of its own: (site, entry-point name)."""
    out = {}
    for name in MISTAKES:
        root = tmp_path_factory.mktemp(name.replace(" ", "_"))
        out[name] = (str(root), write_distribution(root, name))
    return out


def _run(sites, name, *args):
    site, plugin = sites[name]
    return specreg(*args, plugins=plugin, site=site)


@pytest.mark.parametrize("name", BROKEN)
def test_check_and_plan_refuse_with_the_code(sites, name):
    mistake = MISTAKES[name]
    flags = ("--speculative-algorithm", ALGORITHM, *mistake.flags)
    check, plan = _run(sites, name, "check", *flags), _run(sites, name, "plan", *flags)
    assert check.returncode == 1 and f"error: [{mistake.code}]" in check.stdout, check.stdout
    assert plan.returncode == 1 and f"error: [{mistake.code}]" in plan.stderr, plan.stderr
    assert "Traceback" not in check.stderr + plan.stderr


@pytest.mark.parametrize("name", BROKEN)
def test_the_demo_row_fails_with_the_code(sites, name):
    result = _run(sites, name, "demo", "--algorithm", ALGORITHM, "--kv-cache", "none",
                  "--steps", "4", "--no-progress")
    assert result.returncode == 1, result.stdout + result.stderr
    assert f"[{MISTAKES[name].code}]" in result.stdout.split("error: ", 1)[1], result.stdout
    assert "Traceback" not in result.stderr


@pytest.mark.parametrize("name", BROKEN)
def test_resolve_and_the_kit_refuse_with_the_code(sites, name, monkeypatch):
    site, plugin = sites[name]
    monkeypatch.syspath_prepend(site)
    registry = Registry.load(allowlist={plugin}, fresh=True)
    assert registry.failures == []
    config = {"algorithm": ALGORITHM}
    if MISTAKES[name].flags:  # --speculative-num-steps 6
        config["num_steps"] = 6
    with pytest.raises(SpecRegError) as refused:
        registry.resolve(config)
    assert MISTAKES[name].code in refused.value.codes
    with pytest.raises(ConformanceError) as failed:
        check_algorithm(registry, ALGORITHM, lossless=False)
    codes = {c.problem.code for c in failed.value.report.failed}
    assert MISTAKES[name].code in codes, str(failed.value)


def test_the_plugin_without_a_mistake_passes_everywhere(sites, monkeypatch):
    for command in ("check", "plan"):
        result = _run(sites, "none", command, "--speculative-algorithm", ALGORITHM,
                      "--speculative-num-steps", "6")
        assert result.returncode == 0, result.stdout + result.stderr
    plan = _run(sites, "none", "plan", "--speculative-algorithm", ALGORITHM,
                "--speculative-num-steps", "6").stdout
    assert '"num_steps": 6' in plan and '"num_draft_tokens": 7' in plan  # inferred, not ignored
    site, plugin = sites["none"]
    monkeypatch.syspath_prepend(site)
    report = check_algorithm(Registry.load(allowlist={plugin}, fresh=True), ALGORITHM,
                             samples=500)
    assert not report.failures and " passes: " in report.summary()


@pytest.mark.parametrize("code", sorted({m.code for m in MISTAKES.values() if m.code}))
def test_explain_says_what_each_refusal_means_and_how_to_fix_it(code):
    from specreg.catalog import lookup

    result = specreg("explain", code)
    assert result.returncode == 0 and result.stdout.startswith(f"{code}: {lookup(code).title}")
    assert "Solutions" in result.stdout and "Plugin authors" in result.stdout
