"""The SGLang adapter loaded by SGLang's own plugin loader, in enforce, shadow and off modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from specreg.registry import Registry
from tests.adapters.conftest import run_in_env, runs_per_mode

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def cases(model_dirs):
    llama, dspark = str(model_dirs["llama"]), str(model_dirs["dspark-draft"])
    return [
        {"model_path": llama, "device": "cuda", "speculative_algorithm": "EAGLE", "speculative_num_steps": 3},
        {"model_path": llama, "device": "cuda", "speculative_algorithm": "DSPARK",
         "speculative_num_draft_tokens": 1, "speculative_draft_model_path": dspark},
        {"model_path": llama, "device": "cuda", "speculative_algorithm": "EAGLE"},
        {"model_path": llama, "device": "cuda", "speculative_algorithm": "EAGLE",
         "speculative_num_steps": 2, "speculative_eagle_topk": 4},
    ]


@pytest.fixture(scope="module")
def runs(framework_env, cases):
    # the last case repeats a config: shadow mode logs its disagreement once
    payload = cases + [cases[3]]
    return runs_per_mode(framework_env, str(HERE / "sglang_load.py"), payload, "SPECREG_SGLANG")


def test_sglangs_loader_discovers_the_adapter(runs):
    assert "specreg.adapters.sglang:load" in runs(None)["entry_points"]


def test_enforce_resolves_what_sglang_crashes_on_and_fails_early_with_codes(runs):
    out = runs("enforce")
    eagle, dspark, llama_defaults, tree, _ = out["results"]
    assert not any("SR163" in line for line in out["adapter_log"])  # the tested release
    # steps 3 with topk unset: SGLang's TypeError becomes specreg's chain (3, 1, 4)
    assert eagle["error"] is None and eagle["values"] == [3, 1, 4]
    # one DSpark draft token: a ValueError with SR300 and its fix, raised during argument resolution
    assert dspark["is_value_error"] and "SR300" in dspark["message"] and "Fix:" in dspark["message"]
    assert llama_defaults["values"] == [5, 4, 8]
    # SGLang leaves draft tokens None here; the width function answers from specreg's plan
    plan = Registry.load().resolve({"algorithm": "eagle", "num_steps": 2, "topk": 4})
    assert tree["values"] == [2, 4, plan.config.num_draft_tokens]
    for worker in ("target", "draft"):
        for phase, width in tree["widths"][worker].items():
            assert width == plan.num_tokens_per_req(phase, worker == "draft")


def test_off_leaves_sglang_exactly_as_without_specreg(runs):
    eagle, dspark, llama_defaults, tree, _ = runs(None)["results"]
    assert eagle["error"] == "TypeError"
    assert dspark["is_value_error"] and "SR300" not in dspark["message"]
    assert llama_defaults["values"] == [5, 4, 8]
    assert tree["values"] == [2, 4, None] and tree["widths"]["target"]["target_verify"] is None


def test_shadow_lets_sglang_decide_and_logs_each_disagreement_once(runs):
    out = runs("shadow")
    eagle, dspark, llama_defaults, tree, tree_again = out["results"]
    assert eagle["error"] == "TypeError" and dspark["is_value_error"]
    assert "SR300" not in dspark["message"]  # SGLang's own message
    assert llama_defaults["values"] == [5, 4, 8]
    assert tree["values"] == tree_again["values"] == [2, 4, None]
    log = out["adapter_log"]
    assert any("SR166" in line and "speculative_num_draft_tokens" in line for line in log), log
    assert len(log) == len(set(log))  # the repeated config logs nothing new


def test_hisparse_codes_match_what_sglangs_own_swap_manager_refuses(framework_env):
    from specreg.framework_args.rules import hisparse_runtime_problems

    pairs = [[d, k] for d in (1, 2, 3, 4, 5, 8) for k in (512, 1024, 2048, 4096)]
    results = run_in_env(framework_env, str(HERE / "sglang_hisparse_manager.py"), pairs)
    facts = {"enable_hisparse": True, "disable_radix_cache": True,
             "target_architecture": "DeepseekV32ForCausalLM"}
    for (draft, top_k), result in zip(pairs, results, strict=True):
        found = hisparse_runtime_problems({**facts, "hisparse_config": {"top_k": top_k}}, 1, draft)
        codes = {p.code for p in found}
        assert codes <= {"SR167", "SR168"}
        assert result["accepted"] == (not codes), (draft, top_k, result, codes)


def test_the_plan_reaches_child_processes_and_each_checks_it(framework_env, model_dirs, tmp_path):
    import json
    import subprocess

    script, pickled = str(HERE / "sglang_child.py"), str(tmp_path / "server_args.pkl")
    flags = {"model_path": str(model_dirs["llama"]), "device": "cuda",
             "speculative_algorithm": "EAGLE", "speculative_num_steps": 2, "speculative_eagle_topk": 4}

    def role(name, payload, **extra):
        result = subprocess.run(
            [str(framework_env.python), script, name, pickled], input=json.dumps(payload),
            capture_output=True, text=True, timeout=600,
            env=framework_env.subprocess_env(SPECREG_SGLANG="enforce", **extra),
        )
        assert result.returncode == 0, result.stderr[-3000:]
        return json.loads(result.stdout.strip().splitlines()[-1])

    published = role("launcher", flags)["plan"]
    plan = Registry.load().resolve({"algorithm": "eagle", "num_steps": 2, "topk": 4})
    assert json.loads(published)["widths"] == plan.fingerprint()["widths"]
    child = role("child", {}, SPECREG_SGLANG_PLAN=published)
    assert child == {"error": None, "width": plan.num_tokens_per_req("target_verify")}
    other = dict(json.loads(published), gamma=99)
    child = role("child", {}, SPECREG_SGLANG_PLAN=json.dumps(other))
    assert child["error"] == "ConsistencyError" and "SR165" in child["message"]
