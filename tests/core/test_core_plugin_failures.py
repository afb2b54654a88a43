"""A plugin raising in any hook gives a coded error naming the plugin (SR114), never a bare one."""

from __future__ import annotations

import pytest

from specreg import AlgorithmSpec, CacheSpec, ParamRange, Registry, SpecRegError, hookimpl
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
