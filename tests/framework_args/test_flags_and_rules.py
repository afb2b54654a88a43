"""SGLang and vLLM spellings through config_from_flags and the CLI (no framework needed)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specreg.errors import ConfigError, ConsistencyError
from specreg.framework_args.rules import hisparse_runtime_problems, model_defaults
from specreg.registry.registry import Registry
from specreg.registry.translate import config_from_flags


@pytest.fixture(scope="module")
def registry():
    return Registry.load()


def _plan(registry, data):
    plan = registry.resolve(data)
    return plan.config.num_steps, plan.config.topk, plan.config.num_draft_tokens


@pytest.mark.parametrize(
    ("target", "expected"),
    [("llama", (5, 4, 8)), ("qwen2", (3, 1, 4)), ("dsa", (3, 1, 4))],
)
def test_eagle_defaults_follow_the_target_model(registry, model_dirs, target, expected):
    data = {"speculative_algorithm": "EAGLE", "model_path": str(model_dirs[target])}
    assert _plan(registry, data) == expected


def test_model_default_rule_names_sglangs_architectures():
    assert model_defaults("LlamaForCausalLM") == (5, 4, 8)
    assert model_defaults("Grok1ForCausalLM") == (5, 4, 8)
    assert model_defaults("Qwen2ForCausalLM") == (3, 1, 4)
    assert model_defaults(None) == (3, 1, 4)
    assert model_defaults("LlamaForCausalLM", "STANDALONE") == (3, 1, 4)  # SGLang's own rule


def test_missing_config_json_names_the_path_and_the_fix(tmp_path):
    with pytest.raises(ConfigError) as info:
        config_from_flags({"speculative_algorithm": "eagle", "model_path": str(tmp_path)})
    (found,) = info.value.problems
    assert found.code == "SR160" and str(tmp_path) in found.message and "--model-path" in found.fix
    with pytest.raises(ConfigError) as info:
        config_from_flags({"method": "dflash", "model": str(tmp_path / "none")})
    assert info.value.codes == ("SR160",) and "'model'" in info.value.problems[0].message


def test_invented_flags_are_aliases_with_a_notice_naming_the_real_flag(model_dirs):
    config = config_from_flags({"--speculative-algorithm": "eagle", "--kv-cache": "hisparse"})
    assert config.cache == "hisparse"
    (notice,) = config.notices
    assert notice.code == "SR161" and not notice.is_error and "--enable-hisparse" in notice.fix
    path = model_dirs["dspark-draft"] / "config.json"
    config = config_from_flags({"speculative_algorithm": "dspark", "speculative_draft_config": str(path)})
    assert config.draft_config["dspark_config"]["block_size"] == 5
    assert "--speculative-draft-model-path" in config.notices[0].fix


def test_topk_one_rewrite_is_adopted_with_a_notice(registry):
    data = {"speculative_algorithm": "eagle", "speculative_num_steps": 3,
            "speculative_eagle_topk": 1, "speculative_num_draft_tokens": 8}
    assert _plan(registry, data) == (3, 1, 4)
    assert [n.code for n in config_from_flags(data).notices] == ["SR162"]
    # specreg's own field names keep the strict check
    assert [p.code for p in registry.check({"algorithm": "eagle", "num_steps": 3, "topk": 1,
                                            "num_draft_tokens": 8})] == ["SR201"]


def test_block_size_flags(registry, model_dirs):
    dspark = str(model_dirs["dspark-draft"])
    data = {"speculative_algorithm": "dspark", "speculative_draft_model_path": dspark,
            "speculative_dspark_block_size": 3}
    assert registry.resolve(data).gamma == 3  # the flag wins over the checkpoint's 5
    dflash = {"speculative_algorithm": "dflash", "speculative_draft_model_path": str(model_dirs["dflash-draft"]),
              "speculative_dflash_block_size": 4}
    assert registry.resolve(dflash).config.num_draft_tokens == 4
    with pytest.raises(ConfigError) as info:
        config_from_flags({**data, "speculative_num_draft_tokens": 8})
    assert info.value.codes == ("SR177",)


def test_vllm_dict(registry, model_dirs):
    assert registry.resolve({"method": "eagle", "num_speculative_tokens": 5}).gamma == 5
    assert registry.resolve({"method": "mtp", "num_speculative_tokens": 2}).algorithm.name == "eagle"
    plan = registry.resolve({"method": "dspark", "model": str(model_dirs["dspark-draft"])})
    # the checkpoint's block sits in dspark_config, which neither framework reads: the default 7
    assert plan.gamma == 7 and {"SR309", "SR314"} <= {n.code for n in plan.notices}
    with pytest.raises(ConfigError) as info:
        config_from_flags({"method": "eagle", "num_speculative_tokens": 0})
    assert info.value.codes == ("SR174",)


@pytest.mark.parametrize(
    ("facts", "topk", "draft", "code"),
    [
        ({"target_architecture": "LlamaForCausalLM"}, 1, 4, "SR169"),
        ({"disable_radix_cache": False}, 1, 4, "SR170"),
        ({}, 2, 4, "SR171"),
        ({"speculative_adaptive": True}, 1, 4, "SR172"),
        ({"enable_mixed_chunk": True}, 1, 4, "SR173"),
        ({"hisparse_config": {"top_k": 1024}}, 1, 5, "SR167"),
        ({"hisparse_config": {"top_k": 4096}}, 1, 3, "SR168"),
    ],
)
def test_hisparse_runtime_rules(facts, topk, draft, code):
    base = {"enable_hisparse": True, "disable_radix_cache": True,
            "target_architecture": "DeepseekV32ForCausalLM"}
    found = hisparse_runtime_problems({**base, **facts}, topk, draft)
    assert [p.code for p in found] == [code]
    assert hisparse_runtime_problems(base, 1, 4) == []


def test_cli_check_reports_hisparse_rules_and_accepts_real_flags(model_dirs):
    result = subprocess.run(
        [sys.executable, "-m", "specreg", "check", "--json", "--speculative-algorithm", "EAGLE",
         "--model-path", str(model_dirs["dsa"]), "--enable-hisparse", "--disable-radix-cache",
         "--speculative-num-steps", "5", "--speculative-eagle-topk", "1"],
        capture_output=True, text=True, check=False,
    )
    data = json.loads(result.stdout)
    assert result.returncode == 1
    assert {e["code"] for e in data["errors"]} == {"SR167", "SR168"}


def test_child_process_with_another_plan_is_sr165(registry, monkeypatch):
    from specreg.adapters.sglang import ENV_PLAN, check_fingerprint

    plan = registry.resolve({"algorithm": "eagle"})
    other = registry.resolve({"algorithm": "eagle", "num_steps": 4})
    monkeypatch.setenv(ENV_PLAN, json.dumps(plan.fingerprint()))
    check_fingerprint(plan)
    with pytest.raises(ConsistencyError) as info:
        check_fingerprint(other)
    assert info.value.codes == ("SR165",)


def test_version_check_names_the_tested_release():
    from specreg.adapters.common import version_notice

    assert version_notice("sglang", "0.5.23", ("0.5.23",)) is None
    notice = version_notice("sglang", "0.6.0", ("0.5.23",))
    assert notice.code == "SR163" and "0.5.23" in notice.message and not notice.is_error
