"""Plugins that fail: a plugin raising in any hook gives a coded error naming the plugin (SR114),
never a bare one; plugins that failed to load are named, in `specreg check` and `specreg list`,
as the likely cause of an unknown name (SR140, SR141)."""

from __future__ import annotations

import json

import pytest

from specreg import AlgorithmSpec, CacheSpec, ParamRange, Registry, SpecRegError, hookimpl
from tests.support.cli import BUILTIN, fix_line, specreg
from tests.support.plugins import SpecAndCachePlugin

ALGO = AlgorithmSpec(
    name="hardalgo", drafting="chain", verify_rules=("greedy",),
    num_steps=ParamRange(1, 8, 3), topk=ParamRange(1, 1, 1), num_draft_tokens=ParamRange(2, 9, 4),
)  # fmt: skip
CACHE = CacheSpec(name="hardcache", options={"rows": 4})
HOOKS = {
    "specreg_register_algorithms": "register",
    "specreg_register_caches": "register",
    "specreg_resolve_config": "config, algorithm",
    "specreg_resolve_gamma": "config, algorithm",
    "specreg_num_tokens_per_req": "config, algorithm, phase, is_draft_worker",
    "specreg_validate_config": "config, algorithm, cache, resolution",
    "specreg_make_verifier": "config, algorithm",
    "specreg_make_drafter": "config, algorithm",
    "specreg_make_cache_swapper": "config, cache, resolution",
}


def provider() -> SpecAndCachePlugin:
    """Registers the algorithm and the cache the faulty plugin's hooks run for."""
    return SpecAndCachePlugin(ALGO, caches=(CACHE,))


def _faulty(hook: str, exc: BaseException) -> object:
    namespace: dict = {}
    exec(  # a class with exactly one hook, whose signature pluggy validates
        f"def {hook}(self, {HOOKS[hook]}):\n    raise exc\n", {"exc": exc}, namespace
    )
    return type("Faulty", (), {hook: hookimpl(namespace[hook])})()


@pytest.mark.parametrize("hook", sorted(HOOKS))
@pytest.mark.parametrize(
    "exc", [RuntimeError("boom"), KeyError("k"), RecursionError(), AssertionError()],
    ids=["runtime", "key", "recursion", "assert"],
)  # fmt: skip
def test_every_hook_raising_is_coded_and_names_the_plugin(hook, exc):
    registry = Registry()
    registry.register_plugin(provider(), name="provider")
    registry.register_plugin(_faulty(hook, exc), name="faulty_plugin")
    config = {"algorithm": "hardalgo", "cache": "hardcache"}
    if hook.startswith("specreg_register_"):
        failures = [f for f in registry.failures if f.plugin == "faulty_plugin"]
        assert [f.problem.code for f in failures] == ["SR114"]
        assert "faulty_plugin" in failures[0].problem.render()
        registry.resolve(config)  # the other plugins still work
        return
    with pytest.raises(SpecRegError) as info:
        registry.resolve(config)
    assert "SR114" in info.value.codes and "faulty_plugin" in str(info.value)
    if hook.startswith("specreg_make_"):
        return  # builders run only in resolve; check() validates without building
    problems = registry.check(config)
    assert any(p.code == "SR114" and "faulty_plugin" in p.message for p in problems)


@pytest.mark.parametrize("hook", ["specreg_resolve_config", "specreg_validate_config"])
def test_hook_raising_a_coded_error_keeps_its_code(hook):
    from specreg import ConfigError, problem

    registry = Registry()
    registry.register_plugin(provider(), name="provider")
    registry.register_plugin(
        _faulty(hook, ConfigError(problem("SR104", "plugin says no"))), name="faulty_plugin"
    )
    with pytest.raises(SpecRegError) as info:
        registry.resolve({"algorithm": "hardalgo"})
    assert "SR104" in info.value.codes


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
