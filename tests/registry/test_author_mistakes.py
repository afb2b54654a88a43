"""A plugin author's mistakes stop at `Registry.resolve()` with a coded error that `check`,
`plan`, `demo` and the conformance kit all report: each broken plugin is installed as a real
distribution (tests/support/author_mistakes.py) and the real CLI runs on it in a subprocess."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from specreg import Registry
from specreg.errors import SpecRegError
from specreg.testing import ConformanceError, check_algorithm
from tests.support.author_mistakes import ALGORITHM, MISTAKES, Mistake, write_distribution
from tests.support.cli import specreg

BROKEN = [name for name, mistake in MISTAKES.items() if mistake.code is not None]
TORCH = [name for name in BROKEN if MISTAKES[name].torch]


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


def _check_torch_free(site, plugin, *flags):
    """`specreg check --json FLAGS` through the CLI's main() in a fresh process, which then
    asserts that it imported neither torch nor triton: (exit status, the JSON answer)."""
    code = (
        "import sys\nfrom specreg.cli.command import main\n"
        f"status = main(['check', '--speculative-algorithm', {ALGORITHM!r}, *{list(flags)!r}, "
        "'--json'])\n"
        "assert 'torch' not in sys.modules and 'triton' not in sys.modules, 'imported'\n"
        "sys.exit(status)\n"
    )
    env = dict(os.environ, SPECREG_PLUGINS=plugin)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [site, env.get("PYTHONPATH")]))
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, env=env)
    assert "imported" not in result.stderr and "Traceback" not in result.stderr, result.stderr
    return result.returncode, json.loads(result.stdout)


@pytest.mark.parametrize("name", TORCH)
def test_check_builds_objects_that_need_torch_in_a_child_process(sites, name):
    """The drafter hook imports torch: check's own process imports neither torch nor triton,
    and still reports the code `plan` reports, from the objects a child process built."""
    status, answer = _check_torch_free(*sites[name])
    assert status == 1 and answer["objects_checked"] is True
    assert [e["code"] for e in answer["errors"]] == [MISTAKES[name].code], answer
    assert "Fix: " in answer["errors"][0]["text"]


def test_check_without_the_torch_build_says_the_objects_were_not_checked(sites):
    site, plugin = sites["torch drafter class"]
    status, answer = _check_torch_free(site, plugin, "--no-torch-build")
    assert status == 0 and answer["objects_checked"] is False and answer["errors"] == []
    text = specreg("check", "--speculative-algorithm", ALGORITHM, "--no-torch-build",
                   plugins=plugin, site=site).stdout
    assert "--no-torch-build skipped building them in a child process" in text


def test_the_plugin_without_a_mistake_is_built_in_process_without_a_child(sites):
    """No torch import in its hooks: check builds its objects in its own process (torch
    refused), so --no-torch-build changes nothing."""
    for flags in ((), ("--no-torch-build",)):
        status, answer = _check_torch_free(*sites["none"], *flags)
        assert status == 0 and answer["objects_checked"] is True, answer


def test_a_child_that_dies_without_an_answer_is_sr157(tmp_path):
    dying = Mistake("a drafter hook that kills its process", None,
                    drafter='__import__("os")._exit(7)', torch=True)
    plugin = write_distribution(tmp_path, "dying drafter", dying)
    status, answer = _check_torch_free(str(tmp_path), plugin)
    assert status == 1 and [e["code"] for e in answer["errors"]] == ["SR157"], answer
    assert "exit status 7" in answer["errors"][0]["message"]
    assert "--no-torch-build" in answer["errors"][0]["fix"]
