"""The gamma/width table through the registry, for both layouts, plus mismatch and defaults."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from specreg import ConfigError, Phase, SpecConfig
from tests.support.cli import plan_json, specreg
from tests.support.dspark import load

VANILLA = {"vocab_size": 64, "markov_rank": 8, "markov_head_type": "vanilla", "mask_token_id": 4}


def _dense(block):
    return {**VANILLA, "block_size": block}


def _bonus(block):
    return {**VANILLA, "block_size": block, "sample_from_anchor": False}


@pytest.mark.parametrize("n", range(2, 10))
@pytest.mark.parametrize("layout", ["dense", "bonus_anchor"])
@pytest.mark.parametrize("from_cli", [True, False])
def test_width_table(registry, n, layout, from_cli):
    gamma = n - 1
    draft_config = _dense(gamma) if layout == "dense" else _bonus(gamma + 1)
    config = {"algorithm": "dspark", "draft_config": draft_config}
    if from_cli:
        config["num_draft_tokens"] = n
    plan = registry.resolve(config)
    draft_width = gamma if layout == "dense" else gamma + 1
    assert plan.gamma == gamma and plan.config.num_draft_tokens == n
    assert plan.config.topk == 1 and plan.config.num_steps == 1
    assert plan.num_tokens_per_req(Phase.TARGET_VERIFY) == n
    assert plan.num_tokens_per_req(Phase.TARGET_VERIFY, is_draft_worker=True) == draft_width
    for worker in (False, True):
        assert plan.num_tokens_per_req(Phase.DRAFT_DECODE, worker) == draft_width
        assert plan.num_tokens_per_req(Phase.DRAFT_EXTEND, worker) == n
    assert plan.verifier.runtime.layout == layout
    assert plan.notices == ()


def test_issue_example_dense_n8(registry):
    plan = registry.resolve({"algorithm": "dspark", "num_draft_tokens": 8, "draft_config": _dense(7)})
    assert plan.num_tokens_per_req("target_verify") == 8
    assert plan.num_tokens_per_req("target_verify", is_draft_worker=True) == 7


def test_n1_is_sr300_with_the_fix(registry):
    with pytest.raises(ConfigError) as info:
        registry.resolve({"algorithm": "dspark", "num_draft_tokens": 1})
    assert info.value.code == "SR300"
    first = info.value.problems[0]
    assert "got 1" in first.message and "--speculative-num-draft-tokens" in first.fix


def test_cli_and_checkpoint_disagree_is_an_error_naming_both(registry):
    config = {"algorithm": "dspark", "num_draft_tokens": 8, "draft_config": _dense(5)}
    problems = registry.check(config)
    mismatch = [p for p in problems if p.code == "SR305"]
    assert len(mismatch) == 1 and mismatch[0].is_error
    text = mismatch[0].render()
    assert "--speculative-num-draft-tokens 8" in text and "gamma=7" in text
    assert "gamma=5" in text and "--speculative-num-draft-tokens 6" in text
    with pytest.raises(ConfigError):
        registry.resolve(config)


def test_bonus_anchor_mismatch_counts_the_anchor(registry):
    # bonus-anchor block_size 8 = gamma 7: n 8 agrees, n 9 does not
    registry.resolve({"algorithm": "dspark", "num_draft_tokens": 8, "draft_config": _bonus(8)})
    codes = [p.code for p in registry.check(
        {"algorithm": "dspark", "num_draft_tokens": 9, "draft_config": _bonus(8)}
    )]
    assert codes == ["SR305"]


def test_default_gamma_with_notice(registry):
    plan = registry.resolve({"algorithm": "dspark", "draft_config": load("no_block_size")})
    assert plan.gamma == 7 and plan.num_tokens_per_req("target_verify") == 8
    assert [n.code for n in plan.notices] == ["SR309"]
    assert all(n.severity == "warning" for n in plan.notices)


def test_no_draft_config_resolves_with_a_notice(registry):
    plan = registry.resolve({"algorithm": "dspark"})
    assert plan.gamma == 7 and plan.num_tokens_per_req("target_verify", True) == 7
    assert [n.code for n in plan.notices] == ["SR308"]
    plan = registry.resolve({"algorithm": "dspark", "num_draft_tokens": 4})
    assert plan.gamma == 3 and [n.code for n in plan.notices] == ["SR308"]


def test_topk_and_num_steps_are_forced_to_one_with_a_warning(registry):
    plan = registry.resolve(
        {"algorithm": "dspark", "topk": 4, "num_steps": 3, "draft_config": _dense(7)}
    )
    assert plan.config.topk == 1 and plan.config.num_steps == 1
    notices = {n.field: n for n in plan.notices}
    assert notices["topk"].code == "SR107" and "topk=4" in notices["topk"].message
    assert notices["num_steps"].code == "SR107"


@pytest.mark.parametrize(
    ("name", "code"),
    [("dflash_only", "SR303"), ("no_mask", "SR304"), ("mask_out_of_vocab", "SR304"),
     ("invalid_fields", "SR301"), ("layout_mismatch", "SR306")],
)
def test_checkpoint_errors_surface_through_the_registry(registry, name, code):
    with pytest.raises(ConfigError) as info:
        registry.resolve({"algorithm": "dspark", "draft_config": load(name)})
    assert code in info.value.codes


def test_dflash_runs_a_block_of_n_below_the_checkpoints_block(registry):
    """SGLang 0.5.23's DFlash worker runs block_size = speculative_num_draft_tokens (n), so the
    draft forward and the draft worker's verify span n, not the checkpoint's 16."""
    plan = registry.resolve(
        {"algorithm": "dflash", "num_draft_tokens": 8, "draft_config": load("dflash_only")}
    )
    assert plan.num_tokens_per_req("target_verify") == 8
    assert plan.num_tokens_per_req("target_verify", is_draft_worker=True) == 8
    assert plan.num_tokens_per_req("draft_decode", is_draft_worker=True) == 8
    assert plan.gamma == 7 and not plan.algorithm.supports_ragged_verify
    plan = registry.resolve({"algorithm": "dflash", "draft_config": load("dflash_only")})
    assert plan.num_tokens_per_req("target_verify") == 16 and plan.gamma == 15


def test_dflash_defaults_and_errors(registry):
    plan = registry.resolve({"algorithm": "dflash"})
    assert plan.num_tokens_per_req("target_verify") == 16
    assert [n.code for n in plan.notices] == ["SR308"]
    plan = registry.resolve({"algorithm": "dflash", "num_draft_tokens": 6})
    assert plan.num_tokens_per_req("target_verify", True) == 6
    with pytest.raises(ConfigError) as info:
        registry.resolve(
            {"algorithm": "dflash", "num_draft_tokens": 20, "draft_config": load("dflash_only")}
        )
    assert info.value.code == "SR310" and "exceeds the draft block size 16" in str(info.value)
    with pytest.raises(ConfigError) as info:
        registry.resolve({"algorithm": "dflash", "num_draft_tokens": 1})
    assert info.value.code == "SR300"


def test_capabilities(registry):
    dspark = registry.get_algorithm("dspark")
    assert dspark.drafting == "block" and dspark.uses_target_hidden_states
    assert dspark.owns_draft_kv and dspark.supports_ragged_verify
    assert dspark.verify_rules == ("greedy", "chain_sampling")
    assert not registry.get_algorithm("dflash").supports_ragged_verify
    plan = registry.resolve({"algorithm": "dspark", "draft_config": load("top_level")})
    assert plan.verifier.runtime.target_layer_ids == (1, 3)


def test_other_algorithms_are_left_alone():
    from specreg_dspark import plugin

    from specreg import AlgorithmSpec

    other = AlgorithmSpec(name="other", drafting="chain", verify_rules=("greedy",))
    config = SpecConfig(algorithm="other", num_draft_tokens=4)
    assert plugin.specreg_resolve_config(config, other, {}) is None
    assert plugin.specreg_resolve_candidates(config, other) is None
    assert plugin.specreg_resolve_sizes([config], other, {}) is None
    assert plugin.specreg_validate_config(config, other, None, None, {}) is None
    assert plugin.specreg_make_verifier(config, other, None, {}) is None
    assert plugin.specreg_make_drafter(config, other, None, {}) is None


def test_cli_check_reports_both_values(tmp_path):
    draft = tmp_path / "config.json"
    draft.write_text(json.dumps(_dense(5)))
    result = subprocess.run(
        [sys.executable, "-m", "specreg", "check", "--speculative-algorithm", "dspark",
         "--speculative-num-draft-tokens", "8", "--speculative-draft-config", str(draft)],
        capture_output=True, text=True,
    )
    assert result.returncode == 1
    assert "SR305" in result.stdout and "gamma=5" in result.stdout and "gamma=7" in result.stdout


def test_plugin_import_does_not_import_torch():
    code = "import specreg_dspark.plugin, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_dspark_one_draft_token_says_what_to_set():
    result = specreg("check", "--speculative-algorithm", "dspark", "--speculative-num-draft-tokens", "1")
    assert result.returncode == 1
    assert "SR300" in result.stdout and "--speculative-num-draft-tokens" in result.stdout
    assert "SR103" not in result.stdout  # the plugin's own message replaces the generic one


def test_dspark_dense_widths(tmp_path):
    # specreg's own fields: without a draft checkpoint the dense defaults apply (SR308 notice);
    # SGLang's flags without --speculative-draft-model-path are SR178, as SGLang refuses them
    config = tmp_path / "spec.json"
    config.write_text(json.dumps({"algorithm": "dspark", "num_draft_tokens": 8}))
    data = plan_json("--config", str(config))
    assert data["widths"]["target"]["target_verify"] == 8
    assert data["widths"]["draft"]["target_verify"] == 7


def test_dspark_block_size_disagreeing_with_n_reports_both(tmp_path):
    config = tmp_path / "config.json"
    config.write_text(json.dumps({"block_size": 4, "mask_token_id": 0, "markov_rank": 8,
                                  "markov_head_type": "vanilla"}))
    result = specreg("check", "--speculative-algorithm", "dspark",
                     "--speculative-num-draft-tokens", "8", "--speculative-draft-config", str(config))
    assert result.returncode == 1 and "SR305" in result.stdout
    assert "4" in result.stdout and "8" in result.stdout
