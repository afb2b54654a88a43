import json
import threading

import pytest

from specreg import AlgorithmSpec, ParamRange, Phase, Registry, SpecConfig, hookimpl
from specreg import resolve_num_tokens_per_req as sglang_style_width
from specreg.backend import triton_available
from specreg.errors import ConfigError, UnknownPhaseError
from tests.support.plugins import SpecPlugin, TreeVerifierStand

TREE = AlgorithmSpec(
    name="treealgo",
    drafting="tree",
    verify_rules=("tree_greedy",),
    num_steps=ParamRange(0, 8, 3),
    topk=ParamRange(1, 8, 1),
    num_draft_tokens=ParamRange(1, 64, 4),
)


class TreePlugin(TreeVerifierStand, SpecPlugin):
    algorithms = (TREE,)

    @hookimpl
    def specreg_resolve_config(self, config, algorithm):
        if algorithm.name != "treealgo":
            return None
        steps = config.num_steps if config.num_steps is not None else 3
        return config.evolve(
            num_steps=steps, topk=config.topk or 1, num_draft_tokens=config.num_draft_tokens or steps + 1
        )


@pytest.fixture
def registry():
    r = Registry()
    r.register_plugin(TreePlugin(), "tree")
    return r


def test_plan_accessors_are_plain_lookups(registry):
    plan = registry.resolve(SpecConfig(algorithm="treealgo", num_steps=5))
    assert plan.gamma == 5
    assert plan.num_tokens_per_req(Phase.TARGET_VERIFY) == 6
    assert plan.num_tokens_per_req("target_verify") == 6
    assert plan.num_tokens_per_req("Target-Verify") == 6  # normalised on the slow path
    with pytest.raises(UnknownPhaseError):
        plan.num_tokens_per_req("decode")
    with pytest.raises(UnknownPhaseError):
        plan.num_tokens_per_req(None)  # type: ignore[arg-type]
    data = plan.to_dict()
    json.dumps(data)
    assert data["widths"]["draft"] == {"draft_decode": 1, "draft_extend": 6, "target_verify": 6}
    assert data["kernel_backends"]["cpu"] == "torch"
    with pytest.raises(AttributeError):
        plan.gamma = 3  # frozen


def test_candidate_steps_size_for_the_widest_candidate(registry):
    plan = registry.resolve({"algorithm": "treealgo", "num_steps": 1, "candidate_steps": [0, 1, 3, 5]})
    assert plan.config.num_steps == 1  # the active config stays the user's
    assert plan.num_tokens_per_req("target_verify") == 6
    assert plan.num_tokens_per_req("draft_extend") == 6
    assert plan.gamma == 5


def test_threads_resolving_the_same_config_get_equal_plans(registry):
    config = SpecConfig(algorithm="treealgo", num_steps=4, topk=1)
    plans, errors = [], []
    barrier = threading.Barrier(8)

    def work():
        try:
            barrier.wait()
            for _ in range(20):
                plans.append(registry.resolve(config))
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(plans) == 160
    first = plans[0]
    assert all(p == first and p.to_dict() == first.to_dict() for p in plans)


def test_fingerprint_lists_plugins_widths_and_backends(registry):
    fp = registry.resolve({"algorithm": "treealgo"}).fingerprint()
    assert fp["algorithm"] == "treealgo"
    assert "tree==None" in fp["plugins"]
    assert fp["widths"]["target"]["target_verify"] == 4
    assert set(fp["kernel_backends"]) == {"cpu", "cuda"}


def test_the_kernel_backend_is_fixed_when_the_plan_is_resolved(registry, monkeypatch):
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "torch")
    plan = registry.resolve({"algorithm": "treealgo"})
    assert plan.kernel_backend == "torch"
    assert plan.kernel_backends() == {"cpu": "torch", "cuda": "torch"}  # torch even for cuda
    before = (plan.fingerprint(), plan.to_dict()["kernel_backends"])
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "auto")
    assert (plan.fingerprint(), plan.to_dict()["kernel_backends"]) == before
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "cuda")  # even a bad value no longer matters
    assert plan.fingerprint() == before[0]
    monkeypatch.delenv("SPECREG_KERNEL_BACKEND")
    auto = registry.resolve({"algorithm": "treealgo"})
    assert auto.kernel_backend == "auto" and auto != plan
    assert auto.kernel_backends()["cuda"] == ("triton" if triton_available() else "torch")


def test_a_bad_backend_variable_is_a_resolve_time_error(registry, monkeypatch):
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "cuda")
    with pytest.raises(ConfigError) as info:
        registry.resolve({"algorithm": "treealgo"})
    assert info.value.codes == ("SR116",)
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "cuda")
    with pytest.raises(ConfigError) as info:  # reported with the config's own problems
        registry.resolve({"algorithm": "treealgo", "num_steps": -1})
    assert "SR116" in info.value.codes and len(info.value.codes) > 1


def test_sglang_style_function(registry):
    config = {"algorithm": "treealgo", "num_steps": 2}
    assert sglang_style_width(phase="target_verify", config=config, registry=registry) == 3
    assert sglang_style_width(phase="draft_decode", config=config, registry=registry) == 1
    with pytest.raises(ValueError) as info:
        sglang_style_width(phase="target-verfy", config=config, registry=registry)
    assert "SR100" in str(info.value) and "target_verify" in str(info.value)
