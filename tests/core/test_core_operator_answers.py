"""Issue #13, items 1-5: each command typed as a user would (a real subprocess), answered with
an exit code, a catalog code and a fix line in the user's own terms."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys

import pytest

BUILTIN = "eagle,dspark,hisparse"
ABSURD = (
    "--speculative-algorithm", "eagle", "--kv-cache", "hisparse", "--speculative-num-steps", "32",
    "--speculative-eagle-topk", "8", "--speculative-num-draft-tokens", "1024",
)


def specreg(*args: str, plugins: str | None = BUILTIN, site=None, cwd=None):
    env = {k: v for k, v in os.environ.items() if k != "SPECREG_PLUGINS"}
    if plugins is not None:
        env["SPECREG_PLUGINS"] = plugins
    if site is not None:
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(site), env.get("PYTHONPATH")]))
    return subprocess.run(
        [sys.executable, "-m", "specreg", *args], capture_output=True, text=True, env=env, cwd=cwd
    )


def fix_line(text: str, code: str) -> str:
    """The fix sentence of the problem with `code` in `text`."""
    match = re.search(rf"\[{code}\][^\n]*?Fix: (.*?)\(specreg explain {code}\)", text)
    assert match, f"no {code} with a fix in:\n{text}"
    return match.group(1)


# ---------------------------------------------------------------- 1. plugins that failed to load
def test_unknown_algorithm_names_the_plugins_that_failed_to_load(testplugins_site):
    result = specreg("check", "--speculative-algorithm", "medusa",
                     plugins=f"{BUILTIN},broken,badhook", site=testplugins_site)
    assert result.returncode == 1
    assert "SR101" not in result.stdout
    assert "unknown algorithm 'medusa'" in result.stdout
    assert "'badhook' (SR111)" in result.stdout and "'broken' (SR110)" in result.stdout
    assert "most likely provides 'medusa'" in result.stdout
    assert fix_line(result.stdout, "SR140").startswith(
        "fix the plugin that failed to load (`specreg list` shows why it failed)"
    )


def test_list_exits_1_when_a_plugin_failed_to_load(testplugins_site):
    result = specreg("list", plugins=f"{BUILTIN},broken", site=testplugins_site)
    assert result.returncode == 1
    assert "Load failures" in result.stdout and "[SR110]" in result.stdout
    assert "1 load failure(s): exit status 1." in result.stdout
    result = specreg("list", "--json", plugins=f"{BUILTIN},badhook", site=testplugins_site)
    assert result.returncode == 1
    assert [f["code"] for f in json.loads(result.stdout)["failures"]] == ["SR111"]


def test_list_exits_0_without_failures():
    result = specreg("list")
    assert result.returncode == 0 and "Load failures" not in result.stdout


def test_allowlist_name_matching_no_entry_point_is_reported():
    result = specreg("list", plugins="eagle,bogus")
    assert result.returncode == 1
    assert "[SR141] SPECREG_PLUGINS names 'bogus', which matches no installed entry point" in (
        result.stdout
    )
    assert fix_line(result.stdout, "SR141").startswith("remove 'bogus' from SPECREG_PLUGINS")
    # and an algorithm the missing plugin would provide names it as the likely cause
    result = specreg("check", "--speculative-algorithm", "dspark", plugins="eagle,dspak")
    assert result.returncode == 1 and "'dspak' (SR141)" in result.stdout


# ------------------------------------------------------------------------------- 2. demo flags
@pytest.mark.parametrize("steps", ["-5", "0", "100000000000000000000"])
def test_demo_checks_steps_before_running(steps):
    result = specreg("demo", "--steps", steps)
    assert result.returncode == 1  # a coded problem in the input, as in every command
    assert "Traceback" not in result.stderr and "RuntimeError" not in result.stderr
    assert f"[SR143] specreg demo --steps {steps} is outside [1, 472]" in result.stderr
    assert fix_line(result.stderr, "SR143").startswith("pass --steps within [1, 472]")


def test_demo_checks_the_plot_path_before_the_run(tmp_path):
    result = specreg("demo", "--plot", "missing_dir/x.png", cwd=tmp_path)
    assert result.returncode == 1  # a coded problem in the input, as in every command
    assert result.stdout == ""  # refused before any row ran
    assert "Traceback" not in result.stderr and "[SR144]" in result.stderr
    assert fix_line(result.stderr, "SR144").startswith("create the folder first (mkdir -p missing_dir)")


def test_demo_unknown_algorithm_fix_names_the_demo_flag():
    result = specreg("demo", "--algorithm", "medusa")
    assert result.returncode == 1  # a coded problem in the input, as in every command
    fix = fix_line(result.stderr, "SR101")
    assert "--algorithm" in fix and "--speculative-algorithm" not in fix


# ---------------------------------------------------------------- 3. one cause, one error
def test_zero_draft_tokens_does_not_blame_the_plugin():
    result = specreg("check", "--speculative-algorithm", "eagle", "--speculative-num-draft-tokens", "0")
    assert result.returncode == 1
    assert "SR115" not in result.stdout
    assert re.findall(r"\[SR\d+\]", result.stdout) == ["[SR103]"]
    assert fix_line(result.stdout, "SR103") == "set --speculative-num-draft-tokens within [2, 1024]. "


def test_huge_num_steps_reports_one_sr103():
    result = specreg("check", "--speculative-algorithm", "eagle",
                     "--speculative-num-steps", "99999999999999999999999")
    assert result.returncode == 1
    assert re.findall(r"\[SR\d+\]", result.stdout) == ["[SR103]"]
    assert "(inferred)" not in result.stdout
    assert fix_line(result.stdout, "SR103") == "set --speculative-num-steps within [1, 32]. "


def test_cache_typo_does_not_hide_the_algorithm_problem():
    result = specreg("check", "--speculative-algorithm", "dspark",
                     "--speculative-num-draft-tokens", "1", "--kv-cache", "hisparce")
    assert result.returncode == 1
    assert "Did you mean 'hisparse'?" in result.stdout
    assert fix_line(result.stdout, "SR102").startswith("pass one of them to --kv-cache")
    assert "--speculative-num-draft-tokens" in fix_line(result.stdout, "SR300")
    assert "--speculative-draft-model-path" in fix_line(result.stdout, "SR178")
    assert "3 problem(s) found." in result.stdout


# ---------------------------------------------------------------- 4. memory of absurd configs
def test_plan_states_its_memory():
    result = specreg("plan", *ABSURD, "--json")
    assert result.returncode == 0, result.stderr
    memory = json.loads(result.stdout)["memory"]
    buffers = {b["name"]: b for b in memory["buffers"]}
    assert buffers["device_buffer"]["device_bytes"] == 64 * (4096 + 1024 + 1024 * 2048 - 4096) * 656
    assert buffers["host_cache"]["host_bytes"] == 64 * 32768 * 656
    assert memory["device_bytes"] > 80 * 2**30
    assert memory["unstated"] == []
    assert buffers["tree_mask (full)"]["owner"] == "drafter"
    assert buffers["tree_mask (full)"]["device_bytes"] == 1024 * 1024
    assert buffers["tree_mask (full)"]["per"].startswith("per request")
    assert buffers["output_tokens"] == {
        "name": "output_tokens", "device_bytes": 33 * 8, "host_bytes": 0, "per": "per request",
        "owner": "verifier",
    }
    text = specreg("plan", *ABSURD).stdout
    assert "memory         total: device 84.1 GiB, host 1.3 GiB" in text


@pytest.mark.parametrize("command", ["check", "plan"])
def test_memory_budget_is_enforced_with_a_code(command):
    result = specreg(command, *ABSURD, "--memory-budget", "16GiB")
    assert result.returncode == 1
    out = result.stdout + result.stderr
    assert "[SR145] the plan needs 84.1 GiB of device memory, over the 16.0 GiB budget" in out
    assert "cache_swapper.device_buffer" in out
    assert fix_line(out, "SR145").startswith("lower the draft widths (--speculative-num-draft-tokens")
    ok = specreg(command, "--speculative-algorithm", "eagle", "--memory-budget", "16GiB")
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_memory_budget_needs_a_size():
    result = specreg("check", "--speculative-algorithm", "eagle", "--memory-budget", "lots")
    assert result.returncode == 1
    assert fix_line(result.stdout, "SR143") == "pass e.g. --memory-budget 16GiB. "


def test_resolving_allocates_nothing_a_server_allocates_later():
    code = (
        "import resource, torch, specreg\n"
        "registry = specreg.Registry.load(allowlist={'eagle', 'hisparse'})\n"
        "registry.resolve({'algorithm': 'eagle'})\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "plan = registry.resolve({'algorithm': 'eagle', 'cache': 'hisparse', 'num_steps': 32,"
        " 'topk': 8, 'num_draft_tokens': 1024})\n"
        "grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
        "print(grown, plan.cache_swapper._state is None, plan.memory().device_bytes)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    grown_kib, lazy, device = result.stdout.split()
    assert lazy == "True" and int(device) > 80 * 2**30
    assert int(grown_kib) < 64 * 1024  # eager swap state alone was > 500 MiB


# ------------------------------------------------------------------------- 5. suggestions
def test_a_cache_passed_as_algorithm_says_use_the_cache_flag():
    result = specreg("check", "--speculative-algorithm", "hisparse")
    assert result.returncode == 1
    assert "[SR146] 'hisparse' is a KV-cache backend, not a speculative algorithm" in result.stdout
    assert "Did you mean 'dspark'" not in result.stdout
    assert fix_line(result.stdout, "SR146").startswith(
        "turn hisparse on with --enable-hisparse --disable-radix-cache, e.g. "
        "--speculative-algorithm eagle --enable-hisparse --disable-radix-cache"
    )


def test_none_says_drop_the_flag():
    result = specreg("check", "--speculative-algorithm", "NONE")
    assert result.returncode == 1
    assert "turns speculative decoding off" in result.stdout
    assert fix_line(result.stdout, "SR146").startswith("drop --speculative-algorithm")


def test_missing_config_file_hint_names_the_config_file(tmp_path):
    result = specreg("check", "--config", "missing.json", cwd=tmp_path)
    assert result.returncode == 1
    fix = fix_line(result.stdout, "SR106")
    assert fix.startswith("point --config at a JSON file of speculative settings")
    assert "checkpoint" not in fix


def test_fractional_steps_get_command_line_advice():
    result = specreg("check", "--speculative-algorithm", "eagle", "--speculative-num-steps", "3.5")
    assert result.returncode == 1
    assert "[SR143] --speculative-num-steps takes a whole number, got '3.5'" in result.stdout
    assert "(str)" not in result.stdout and "as an int" not in result.stdout
    assert fix_line(result.stdout, "SR143") == "pass a whole number to --speculative-num-steps. "


def test_misspelt_flag_gets_a_suggestion():
    result = specreg("check", "--speculative-algorithm", "eagle", "--speculative-eagle-top-k", "4")
    assert result.returncode == 2
    assert "Did you mean '--speculative-eagle-topk'?" in result.stderr
    assert fix_line(result.stderr, "SR142") == "use the flag suggested, or remove it. "


def test_draft_config_path_is_accepted_as_the_fix_says(tmp_path):
    from specreg import Registry, SpecConfig
    from specreg.demo import toy_draft_checkpoint
    from specreg.testing import ToyConfig

    path = tmp_path / "config.json"
    path.write_text(json.dumps(toy_draft_checkpoint(ToyConfig())))
    config = SpecConfig(algorithm="dspark", draft_config=str(path))
    assert config.draft_config["block_size"] == 4
    registry = Registry.load(allowlist={"dspark"}, fresh=True)
    assert not [p for p in registry.check(config) if p.is_error]
    with pytest.raises(ValueError) as info:
        SpecConfig(algorithm="dspark", draft_config=str(tmp_path / "nope" / "config.json"))
    assert info.value.code == "SR106"


def test_hisparse_default_row_bytes_work_with_the_swappers_helpers():
    import torch

    from specreg import Registry
    from specreg.errors import KernelInputError

    registry = Registry.load(allowlist={"eagle", "hisparse"}, fresh=True)
    plan = registry.resolve({"algorithm": "eagle", "cache": "hisparse",
                             "cache_options": {"req_slots": 2, "max_seq_len": 64}})
    swapper = plan.cache_swapper
    assert swapper.layout.row_bytes == 656  # the default
    host = swapper.new_host_cache(dtype=torch.float32)
    dev = swapper.new_device_buffer(dtype=torch.bfloat16)
    assert host.shape[1] * 4 == dev.shape[1] * 2 == 656
    with pytest.raises(KernelInputError) as info:
        swapper.new_host_cache(656, torch.bfloat16)
    text = str(info.value)
    assert info.value.code == "SR411"
    assert "row_elems=656 x 2 bytes = 1312" in text
    assert "Fix: call new_host_cache(dtype=torch.bfloat16) without row_elems" in text


def test_demo_step_limit_matches_the_toy_model():
    from specreg.demo_args import MAX_STEPS, PROMPT_LEN, TOY_POSITIONS, VERIFY_MARGIN
    from specreg.testing import ToyConfig

    assert ToyConfig().max_positions == TOY_POSITIONS
    assert ToyConfig().window == VERIFY_MARGIN
    assert MAX_STEPS == TOY_POSITIONS - PROMPT_LEN - VERIFY_MARGIN


def test_lazy_swap_state_first_used_inside_inference_mode_serves_outside_it():
    import torch

    from specreg import Registry

    registry = Registry.load(allowlist={"eagle", "hisparse"}, fresh=True)
    swapper = registry.resolve({"algorithm": "eagle", "cache": "hisparse",
                                "cache_options": {"req_slots": 2, "max_seq_len": 64}}).cache_swapper
    assert swapper._state is None  # nothing allocated by resolve
    with torch.inference_mode():
        assert swapper.slot_tokens.shape[1] == 2  # first use allocates
    swapper.reset_request(1)  # in-place updates outside inference mode still work
    assert int(swapper.host_cache_locs[1].max()) == -1


# ------------------------------------------------------- the kernel backend, an environment input
def test_check_reports_a_bad_kernel_backend_variable_with_the_configs_problems(monkeypatch):
    """`check` answers what `resolve` would refuse: SR116 for SPECREG_KERNEL_BACKEND, beside the
    config's own problems, and nothing for a sound config under a valid backend."""
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "cuda")
    result = specreg("check", "--speculative-algorithm", "dspark", "--speculative-num-draft-tokens", "1")
    assert result.returncode == 1
    assert "[SR300]" in result.stdout and "[SR116]" in result.stdout
    assert fix_line(result.stdout, "SR116").startswith(
        "set SPECREG_KERNEL_BACKEND to one of them, or unset it"
    )
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "torch")
    result = specreg("check", "--speculative-algorithm", "eagle", "--speculative-num-steps", "3")
    assert result.returncode == 0, result.stdout
