
from __future__ import annotations

import json

import pytest

from specreg import ConfigError, SpecConfig, config_from_flags
from specreg.contract.framework_flags import COMMAND_LINE
from tests.support.cli import fix_line, specreg


def test_config_from_flags_accepts_fields_and_sglang_spellings():
    a = SpecConfig.from_dict({"algorithm": "EAGLE", "num_steps": 3, "topk": 4, "num_draft_tokens": 8})
    b = config_from_flags(
        {
            "--speculative-algorithm": "eagle",
            "--speculative-num-steps": 3,
            "speculative_eagle_topk": 4,
            "speculative_num_draft_tokens": 8,
        }
    )
    assert a == b
    assert a.algorithm == "eagle"


def test_from_dict_names_a_framework_spelling_and_the_function_that_reads_it():
    with pytest.raises(ConfigError) as info:
        SpecConfig.from_dict({"--speculative-algorithm": "eagle", "algorithm": "eagle"})
    (found,) = info.value.problems
    assert found.code == "SR104" and "framework spelling" in found.message
    assert "config_from_flags" in found.fix


def test_flag_table_covers_the_sglang_flags():
    valued = {f.flag for f in COMMAND_LINE if not f.switch}
    switches = {f.flag for f in COMMAND_LINE if f.switch}
    assert switches == {
        "--enable-hisparse", "--disable-radix-cache", "--enable-mixed-chunk", "--speculative-adaptive"
    }
    assert valued == {
        "--speculative-algorithm",
        "--speculative-num-steps",
        "--speculative-eagle-topk",
        "--speculative-num-draft-tokens",
        "--speculative-draft-model-path",
        "--speculative-dspark-block-size",
        "--speculative-dflash-block-size",
        "--model-path",
        "--hisparse-config",
        "--speculative-ngram-max-trie-depth",  # SGLang's NGRAM options (ngram's draft_config)
        "--speculative-ngram-max-bfs-breadth",
        "--speculative-ngram-match-type",
        "--speculative-accept-threshold-single",  # relaxed acceptance (lossy, SR191)
        "--speculative-accept-threshold-acc",
        "--speculative-draft-config",  # specreg's alias (SR161 notice)
        "--kv-cache",  # specreg's alias (SR161 notice)
        "--speculative-verify-mode",  # specreg's own setting (neither framework has it)
    }


def test_the_verify_mode_flag_sets_the_config_field():
    from specreg.registry.translate import config_from_flags

    config = config_from_flags({"speculative_algorithm": "ngram",
                                "speculative_verify_mode": "invariant"})
    assert config.verify_mode == "invariant"
    with pytest.raises(ConfigError, match="SR133"):
        config_from_flags({"speculative_algorithm": "ngram", "speculative_verify_mode": "exact"})


def test_every_problem_is_reported_at_once():
    with pytest.raises(ConfigError) as info:
        SpecConfig.from_dict(
            {"algorithm": "eagle", "num_step": 3, "topk": "4", "num_draft_tokens": True,
             "candidate_steps": [], "cache_options": {"x": 1}}
        )
    codes = info.value.codes
    assert codes.count("SR104") == 3  # unknown key, two type errors
    assert "SR105" in codes and "SR108" in codes
    assert "num_steps" in str(info.value)  # the unknown key gets a suggestion


def test_missing_algorithm_is_reported():
    with pytest.raises(ConfigError) as info:
        SpecConfig.from_dict({"num_steps": 3})
    assert info.value.codes == ("SR104",)


def test_draft_config_path_is_read(tmp_path):
    path = tmp_path / "config.json"
    path.write_text(json.dumps({"block_size": 8, "nested": {"a": [1, 2]}}))
    config = SpecConfig.from_dict({"algorithm": "dspark", "draft_config": str(path)})
    assert config.draft_config["block_size"] == 8
    assert config.to_dict()["draft_config"] == {"block_size": 8, "nested": {"a": [1, 2]}}
    with pytest.raises(TypeError):
        config.draft_config["block_size"] = 9  # frozen


@pytest.mark.parametrize("content", ["not json", "[1, 2]"])
def test_unreadable_draft_config_is_sr106(tmp_path, content):
    path = tmp_path / "config.json"
    path.write_text(content)
    with pytest.raises(ConfigError) as info:
        SpecConfig.from_dict({"algorithm": "dspark", "draft_config": str(path)})
    assert info.value.codes == ("SR106",)


def test_missing_draft_config_is_sr106(tmp_path):
    with pytest.raises(ConfigError) as info:
        SpecConfig.from_dict({"algorithm": "dspark", "draft_config": str(tmp_path / "nope.json")})
    assert info.value.codes == ("SR106",)


def test_config_is_frozen_and_hashable():
    config = SpecConfig(algorithm="eagle", candidate_steps=[1, 3])
    assert config.candidate_steps == (1, 3)
    with pytest.raises(AttributeError):
        config.topk = 2  # type: ignore[misc]
    assert hash(config) == hash(SpecConfig(algorithm="eagle", candidate_steps=(1, 3)))


def test_candidate_steps_rules():
    for bad in ([-1], [1, 1], ["a"]):
        with pytest.raises(ConfigError) as info:
            SpecConfig(algorithm="eagle", candidate_steps=bad)
        assert info.value.codes == ("SR105",)


def test_missing_config_file_hint_names_the_config_file(tmp_path):
    result = specreg("check", "--config", "missing.json", cwd=tmp_path)
    assert result.returncode == 1
    fix = fix_line(result.stdout, "SR106")
    assert fix.startswith("point --config at a JSON file of speculative settings")
    assert "checkpoint" not in fix


def test_draft_config_path_is_accepted_as_the_fix_says(tmp_path):
    from specreg import Registry, SpecConfig
    from specreg.cli.demo import toy_draft_checkpoint
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
