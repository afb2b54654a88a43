"""The hisparse plugin through the registry: registration, validation against the plan, swapper."""

from __future__ import annotations

import subprocess
import sys

import pytest
import specreg_hisparse.plugin as hisparse_plugin

from specreg import AlgorithmSpec, ConfigError, ParamRange, Phase, Registry
from tests.support.cli import plan_json, specreg
from tests.support.plugins import SpecPlugin

SMALL = {"top_k": 4, "hot_size": 8, "req_slots": 2, "max_seq_len": 32}


def _chain_plugin():
    return SpecPlugin(
        AlgorithmSpec(
            name="toychain",
            drafting="chain",
            verify_rules=("greedy",),
            num_steps=ParamRange(minimum=0, default=3),
            num_draft_tokens=ParamRange(minimum=1, maximum=16, default=4),
        )
    )


@pytest.fixture
def registry():
    reg = Registry()
    assert reg.register_plugin(hisparse_plugin, "hisparse") == "hisparse"
    assert reg.register_plugin(_chain_plugin(), "toychain") == "toychain"
    return reg


def test_cache_is_registered_with_option_defaults(registry):
    spec = registry.get_cache("hisparse")
    for key in ("top_k", "hot_size", "page_size", "req_slots", "max_steps", "row_bytes"):
        assert key in spec.options
    assert spec.options["policy"] == "lru"


@pytest.mark.parametrize("width", [1, 4])
def test_plan_resolves_and_swapper_covers_verify_width(registry, width):
    plan = registry.resolve(
        {"algorithm": "toychain", "num_draft_tokens": width, "num_steps": width - 1,
         "cache": "hisparse", "cache_options": SMALL}
    )  # fmt: skip
    assert plan.num_tokens_per_req(Phase.TARGET_VERIFY) == width
    swapper = plan.cache_swapper
    assert swapper.layout.max_steps == width
    assert swapper.layout.capacity >= width * 4


def test_width_above_max_steps_is_sr400_with_limit(registry):
    with pytest.raises(ConfigError) as info:
        registry.resolve(
            {"algorithm": "toychain", "num_draft_tokens": 6, "cache": "hisparse",
             "cache_options": {**SMALL, "max_steps": 4}}
        )  # fmt: skip
    assert info.value.codes == ("SR400",)
    text = str(info.value)
    assert "max_steps=4" in text and "--kv-cache-option max_steps=6" in text


def test_layout_problems_surface_through_check(registry):
    problems = registry.check(
        {"algorithm": "toychain", "cache": "hisparse",
         "cache_options": {**SMALL, "hot_size": 2, "policy": "clock"}}
    )  # fmt: skip
    assert sorted(p.code for p in problems) == ["SR401", "SR406"]


def test_unknown_option_is_reported_by_the_default_plugin(registry):
    problems = registry.check(
        {"algorithm": "toychain", "cache": "hisparse", "cache_options": {"hot_sise": 8}}
    )
    assert [p.code for p in problems] == ["SR108"]


def test_other_caches_are_left_alone():
    assert hisparse_plugin.specreg_validate_config(None, None, None, None) == []


@pytest.mark.parametrize("name", ["eagle", "dspark"])
def test_real_algorithms_validate_with_hisparse(name):
    registry = Registry.load(fresh=True)
    try:
        registry.get_algorithm(name)
    except ConfigError:
        pytest.fail(f"the {name} plugin is not installed")
    config = {"algorithm": name, "cache": "hisparse", "cache_options": SMALL}
    assert [p for p in registry.check(config) if p.is_error] == []
    problems = registry.check({**config, "cache_options": {**SMALL, "max_steps": 1}})
    assert [p.code for p in problems if p.is_error] == ["SR400"]


def test_dspark_plan_builds_a_swapper():
    registry = Registry.load(fresh=True)
    plan = registry.resolve({"algorithm": "dspark", "cache": "hisparse", "cache_options": SMALL})
    width = plan.num_tokens_per_req(Phase.TARGET_VERIFY)
    assert plan.cache_swapper.layout.max_steps == width


def test_plugin_import_does_not_import_torch():
    code = "import specreg_hisparse.plugin, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_hisparse_any_step_count_and_the_capacity_error():
    four = plan_json("--speculative-algorithm", "eagle", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "4",
                     "--kv-cache", "hisparse")
    assert four["cache"] == "hisparse" and four["widths"]["target"]["target_verify"] == 4
    assert four["cache_swapper"].startswith("HiSparseSwapper")
    one = plan_json("--speculative-algorithm", "eagle", "--speculative-num-steps", "1",
                    "--speculative-eagle-topk", "1", "--speculative-num-draft-tokens", "2",
                    "--kv-cache", "hisparse")
    assert one["widths"]["target"]["target_verify"] == 2
    result = specreg("check", "--speculative-algorithm", "eagle", "--speculative-num-steps", "7",
                     "--speculative-eagle-topk", "1", "--kv-cache", "hisparse",
                     "--kv-cache-option", "max_steps=4")
    assert result.returncode == 1 and "SR400" in result.stdout and "max_steps=8" in result.stdout
