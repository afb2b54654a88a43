"""CLI exit codes and output, run as a user would (a subprocess of the installed command)."""

import json
import subprocess
import sys

import pytest


def run(*args, env=None):
    return subprocess.run(
        [sys.executable, "-m", "specreg", *args], capture_output=True, text=True, env=env
    )


def test_check_unknown_algorithm_suggests_the_closest_name():
    result = run("check", "--speculative-algorithm", "eaglee")
    assert result.returncode == 1
    assert "SR101" in result.stdout and "Did you mean 'eagle'" in result.stdout


def test_check_reports_every_problem_and_exits_1():
    result = run(
        "check", "--speculative-algorithm", "eagle", "--speculative-num-steps", "0",
        "--speculative-eagle-topk", "x", "--kv-cache", "nope",
    )
    assert result.returncode == 1
    # the non-integer topk (as command-line advice), the unknown cache and the range: all three
    assert "SR143" in result.stdout and "SR102" in result.stdout and "SR103" in result.stdout
    assert "Fix: pass a whole number to --speculative-eagle-topk" in result.stdout


def test_check_sound_config_exits_0():
    result = run("check", "--speculative-algorithm", "eagle")
    assert result.returncode == 0, result.stdout
    assert "OK" in result.stdout


def test_check_json_and_config_file(tmp_path):
    path = tmp_path / "spec.json"
    path.write_text(json.dumps({"algorithm": "eagle", "num_steps": 0}))
    result = run("check", "--config", str(path), "--json")
    data = json.loads(result.stdout)
    assert result.returncode == 1 and data["ok"] is False
    assert data["errors"][0]["code"] == "SR103"
    # flags override the file
    result = run("check", "--config", str(path), "--speculative-num-steps", "3")
    assert result.returncode == 0, result.stdout


def test_plan_json_prints_every_phase_and_worker():
    result = run(
        "plan", "--speculative-algorithm", "eagle", "--speculative-num-steps", "3",
        "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8", "--json",
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["widths"]["target"] == {"draft_decode": 4, "draft_extend": 8, "target_verify": 8}
    assert set(data["widths"]["draft"]) == {"draft_decode", "draft_extend", "target_verify"}
    assert data["gamma"] == 7
    assert data["kernel_backends"]["cpu"] == "torch"


def test_plan_text_and_failure():
    result = run("plan", "--speculative-algorithm", "eagle")
    assert result.returncode == 0 and "target_verify" in result.stdout
    result = run("plan", "--speculative-algorithm", "eagle", "--speculative-num-steps", "0")
    assert result.returncode == 1 and "SR103" in result.stderr


def test_list_json_shows_plugins_with_versions():
    result = run("list", "--json")
    assert result.returncode == 0
    data = json.loads(result.stdout)
    names = {a["name"] for a in data["algorithms"]}
    assert {"eagle", "eagle3", "dspark", "dflash"} <= names
    assert {c["name"] for c in data["caches"]} >= {"hisparse"}
    plugins = {p["name"]: p for p in data["plugins"]}
    assert plugins["eagle"]["distribution"] == "specreg" and plugins["eagle"]["version"]


def test_list_text_reports_load_failures(tmp_path):
    env = {**__import__("os").environ, "SPECREG_PLUGINS": ""}
    result = run("list", env=env)
    assert result.returncode == 0 and "(none)" in result.stdout


def test_bad_cache_option_syntax_is_coded():
    result = run("check", "--speculative-algorithm", "eagle", "--kv-cache", "hisparse",
                 "--kv-cache-option", "novalue")
    assert result.returncode == 1 and "SR108" in result.stdout


@pytest.mark.parametrize("command", [
    ["list"], ["check", "--speculative-algorithm", "eagle"], ["explain", "SR100"],
    # SGLang's HiSparse rules need the resolved sizes, not the plan's objects
    ["check", "--speculative-algorithm", "eagle", "--enable-hisparse", "--disable-radix-cache"],
    # the objects (and their memory, for a budget) are built in a child process
    ["check", "--speculative-algorithm", "eagle", "--memory-budget", "100"],
])
def test_list_check_explain_do_not_import_torch(command):
    code = (
        "import sys\nfrom specreg.cli.command import main\n"
        f"main({command!r})\n"
        "assert 'torch' not in sys.modules and 'triton' not in sys.modules\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert result.returncode == 0, result.stderr
    if "--memory-budget" in command:
        assert "[SR145]" in result.stdout  # the child's verdict reached check


def test_usage_error_exits_2():
    assert run("frobnicate").returncode == 2
