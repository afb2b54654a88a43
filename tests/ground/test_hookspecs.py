"""One test per hook specification, named after it (datasette style), plus the meta test."""

from __future__ import annotations

import inspect

import pytest

import specreg.hookspecs as hookspecs
from specreg import (
    AlgorithmSpec,
    CacheSpec,
    ConfigError,
    ParamRange,
    Phase,
    PluginError,
    Registry,
    SpecRegError,
    UnknownNameError,
    hookimpl,
    problem,
)
from tests.support.plugins import SpecAndCachePlugin, TreeVerifierStand

TREE = AlgorithmSpec(
    name="treealgo",
    drafting="tree",
    verify_rules=("tree_greedy",),
    num_steps=ParamRange(1, 8, 3),
    topk=ParamRange(1, 8, 2),
    num_draft_tokens=ParamRange(2, 64, 6),
)
CACHE = CacheSpec(name="memcache", options={"rows": 16})


class TreeAndCache(TreeVerifierStand, SpecAndCachePlugin):
    """Registers TREE and CACHE, and a stand-in verifier for TREE."""


def make_registry(*plugins) -> Registry:
    """A registry of the plugin "tree" (registers TREE and CACHE, with a stand-in verifier) and
    the plugins holding the hook each test exercises."""
    registry = Registry()
    registry.register_plugin(TreeAndCache(TREE, caches=(CACHE,)), "tree")
    for i, plugin in enumerate(plugins):
        assert registry.register_plugin(plugin, f"extra{i}") == f"extra{i}", registry.failures
    return registry


def test_every_hookspec_has_a_test():
    names = [n for n, f in inspect.getmembers(hookspecs, inspect.isfunction) if n.startswith("specreg_")]
    assert len(names) == 13
    missing = [n for n in names if f"test_hook_{n}" not in globals()]
    assert not missing, f"hooks without a test: {missing}"


def test_every_hookspec_has_a_docstring_that_says_when_and_returns():
    for name, func in inspect.getmembers(hookspecs, inspect.isfunction):
        if name.startswith("specreg_"):
            doc = inspect.getdoc(func) or ""
            assert "Called" in doc and ":returns:" in doc, name


def test_hook_specreg_register_algorithms():
    registry = make_registry()
    spec = registry.get_algorithm("TREEALGO")
    assert spec.drafting == "tree" and spec.origin.plugin == "tree"


def test_hook_specreg_register_caches():
    registry = make_registry()
    cache = registry.get_cache("MemCache")
    assert cache.name == "memcache" and cache.options == {"rows": 16}
    assert cache.origin.plugin == "tree"


def test_hook_specreg_register_errors():
    from specreg import catalog
    from specreg.catalog import ErrorEntry

    entry = ErrorEntry(code="SR512", title="Widget misconfigured", meaning="m", when="w",
                       solutions=["s"], example_fix="e")

    class Errors:
        @hookimpl
        def specreg_register_errors(self, register):
            register(entry)

        @hookimpl
        def specreg_validate_config(self, config, algorithm):
            if algorithm.name == "treealgo" and config.topk == 7:
                return [problem("SR512", "topk 7 breaks the widget", fix="use another topk")]
            return []

    registry = make_registry(Errors())
    assert registry.catalog.lookup("sr512") is entry
    assert "SR512" in registry.catalog.entries()
    assert "SR512" not in registry.catalog.builtin_entries()
    with pytest.raises(KeyError):  # the entry lives on that registry, not in a global table
        catalog.lookup("SR512")
    assert "SR512" not in Registry().catalog.entries()
    with pytest.raises(ConfigError) as info:
        registry.resolve({"algorithm": "treealgo", "topk": 7})
    assert info.value.code == "SR512"

    class Squatter:
        @hookimpl
        def specreg_register_errors(self, register):
            register(ErrorEntry(code="SR512", title="other", meaning="m", when="w",
                                solutions=["s"], example_fix="e"))

    class OutOfRange:
        @hookimpl
        def specreg_register_errors(self, register):
            register(ErrorEntry(code="SR150", title="mine", meaning="m", when="w",
                                solutions=["s"], example_fix="e"))

    registry = Registry()
    registry.register_plugin(Errors(), "owner")
    assert registry.register_plugin(Squatter(), "squatter") is None
    assert registry.register_plugin(OutOfRange(), "outofrange") is None
    found = {f.plugin: f.problem for f in registry.failures}
    assert "owner" not in found  # the same entry again (another registry) is fine
    assert found["squatter"].code == "SR119" and "already registered" in found["squatter"].message
    assert found["outofrange"].code == "SR119" and "SR500-SR899" in found["outofrange"].message
    assert registry.catalog.lookup("SR512") is entry  # the first owner keeps its code
    assert registry.catalog.owner("SR512") == "owner"


def test_hook_specreg_register_substitutions():
    from types import MappingProxyType

    from specreg.contract.substitutions import Substitution

    installed = []
    mine = Substitution("widget_swap", "sglang", "SGLang's widget runs the plugin's", installed.append)
    calls = []

    class Seams:
        @hookimpl
        def specreg_register_substitutions(self, register):
            calls.append(1)
            register(mine)

    registry = make_registry(Seams())
    table = registry.substitutions()
    assert isinstance(table, MappingProxyType)  # plain data, resolved once at load
    assert table["widget_swap"] is mine
    assert {"tree_verify", "rejection_sampler"} <= set(table)  # the default plugin's own
    before = len(calls)
    for _ in range(3):
        registry.substitutions()
        registry.resolve({"algorithm": "treealgo", "substitutions": ["widget_swap"]})
    assert len(calls) == before  # nothing goes through pluggy after the load
    with pytest.raises(ConfigError) as info:
        make_registry().resolve({"algorithm": "treealgo", "substitutions": ["widget_swap"]})
    assert info.value.code == "SR181"  # without the plugin, the name is unknown

    def plugin_registering(*substitutions):
        class Plugin:
            @hookimpl
            def specreg_register_substitutions(self, register):
                for substitution in substitutions:
                    register(substitution)

            @hookimpl
            def specreg_register_algorithms(self, register):
                register(AlgorithmSpec(name="lost_with_it", drafting="chain"))

        return Plugin()

    registry = Registry()
    registry.register_plugin(Seams(), "owner")
    bad = {
        "clash": plugin_registering(Substitution("widget_swap", "sglang", "other", print)),
        "core_clash": plugin_registering(Substitution("tree_verify", "sglang", "other", print)),
        "not_one": plugin_registering({"name": "x"}),
        "bad_name": plugin_registering(Substitution("All", "sglang", "s", print)),
        "reserved": plugin_registering(Substitution("off", "sglang", "s", print)),
        "framework": plugin_registering(Substitution("x_swap", "trtllm", "s", print)),
        "summary": plugin_registering(Substitution("x_swap", "vllm", " ", print)),
        "installer": plugin_registering(Substitution("x_swap", "vllm", "s", "not dotted")),
        "twice": plugin_registering(Substitution("x_swap", "vllm", "s", print),
                                    Substitution("x_swap", "vllm", "t", print)),
    }
    for name, plugin in bad.items():
        assert registry.register_plugin(plugin, name) is None, name
    found = {f.plugin: f.problem for f in registry.failures}
    assert "owner" not in found
    assert {name: found[name].code for name in bad} == dict.fromkeys(bad, "SR129")
    assert "already registered by plugin 'owner'" in found["clash"].message
    assert "already registered by plugin 'specreg.default'" in found["core_clash"].message
    assert "not a specreg Substitution" in found["not_one"].message
    assert "'trtllm'" in found["framework"].message
    assert "registered twice" in found["twice"].message
    assert registry.substitutions()["widget_swap"] is mine  # the first owner keeps it
    assert registry.substitutions()["tree_verify"].framework == "sglang"
    with pytest.raises(UnknownNameError):  # a refused plugin keeps nothing it registered
        registry.get_algorithm("lost_with_it")
    with pytest.raises(PluginError) as info:
        Registry(strict=True).register_plugin(bad["core_clash"], "x")
    assert info.value.code == "SR129"


def test_hook_specreg_resolve_config():
    class Infer:
        @hookimpl
        def specreg_resolve_config(self, config, algorithm):
            if config.num_draft_tokens is None:
                return config.evolve(num_steps=config.num_steps or 3, topk=config.topk or 2,
                                     num_draft_tokens=(config.num_steps or 3) * 2 + 1)
            return None

    plan = make_registry(Infer()).resolve({"algorithm": "treealgo", "num_steps": 4})
    assert plan.config.num_draft_tokens == 9
    plan = make_registry().resolve({"algorithm": "treealgo", "num_steps": 4})
    assert plan.config.num_draft_tokens == 6  # default plugin: spec default


def test_hook_specreg_resolve_gamma():
    class Gamma:
        @hookimpl
        def specreg_resolve_gamma(self, config, algorithm):
            return config.num_draft_tokens - 3 if algorithm.name == "treealgo" else None

    assert make_registry().resolve({"algorithm": "treealgo"}).gamma == 5
    assert make_registry(Gamma()).resolve({"algorithm": "treealgo"}).gamma == 3


def test_hook_specreg_num_tokens_per_req():
    class Widths:
        @hookimpl
        def specreg_num_tokens_per_req(self, config, phase, is_draft_worker):
            if phase is Phase.TARGET_VERIFY and is_draft_worker:
                return config.num_draft_tokens - 1
            return None

    plan = make_registry(Widths()).resolve(
        {"algorithm": "treealgo", "num_steps": 3, "topk": 4, "num_draft_tokens": 8}
    )
    assert plan.num_tokens_per_req(Phase.DRAFT_DECODE) == 4
    assert plan.num_tokens_per_req("draft_extend") == 8
    assert plan.num_tokens_per_req("target_verify") == 8
    assert plan.num_tokens_per_req("target_verify", is_draft_worker=True) == 7
    assert plan.num_tokens_per_req("draft_decode", is_draft_worker=True) == 4


def test_hook_specreg_validate_config():
    class Validate:
        @hookimpl
        def specreg_validate_config(self, config, algorithm, cache, resolution):
            found = []
            if config.topk == 3:
                found.append(problem("SR103", "topk 3 is unlucky", accepted="not 3", fix="use 2"))
            if resolution is not None and resolution.gamma > 10:
                found.append(problem("SR103", "gamma too big", severity="warning"))
            return found

    registry = make_registry(Validate())
    with pytest.raises(ConfigError) as info:
        registry.resolve({"algorithm": "treealgo", "topk": 3, "num_steps": 99})
    # both plugins' problems in one error: the default plugin's range check and ours
    assert {p.message for p in info.value.problems} == {
        "treealgo: num_steps=99 (given) is out of range",
        "topk 3 is unlucky",
    }
    plan = registry.resolve({"algorithm": "treealgo", "num_draft_tokens": 20})
    assert [n.message for n in plan.notices] == ["gamma too big"]


class TreeVerifierStub:
    """Satisfies TreeVerifierProtocol (these tests resolve plans; nothing runs a step)."""

    rules = ("tree_greedy",)
    widths = (6,)
    num_draft_tokens = 6

    def verify_greedy(self, tree, target_logits=None):
        raise NotImplementedError

    def verify_sampling(self, tree, target_probs, *, draft_probs=None, keys=None,
                        positions=None, generator=None):
        raise NotImplementedError


class TreeDrafterStub:
    topk, num_steps, num_draft_tokens = 2, 3, 6

    def start(self, logits, hidden):
        raise NotImplementedError

    def step(self, draft, logits, hidden):
        raise NotImplementedError

    def tree(self, draft, bonus_tokens, seq_lens, *, mask_mode=None):
        raise NotImplementedError


def test_hook_specreg_resolve_candidates():
    class Candidates:
        @hookimpl
        def specreg_resolve_candidates(self, config, algorithm):
            if algorithm.name != "treealgo":
                return None
            return [config.evolve(num_steps=s, num_draft_tokens=2 * s, candidate_steps=None)
                    for s in sorted(config.candidate_steps)]

    config = {"algorithm": "treealgo", "topk": 2, "num_steps": 2, "candidate_steps": [1, 4]}
    default = make_registry().resolve(config)
    # the default derivation: a tree keeps topk with 1 + steps * topk nodes
    assert [(c.steps, c.config.num_draft_tokens) for c in default.candidates] == [(1, 3), (4, 9)]
    assert default.num_tokens_per_req("target_verify") == 9 and default.gamma == 8
    plan = make_registry(Candidates()).resolve(config)
    assert [(c.steps, c.config.num_draft_tokens) for c in plan.candidates] == [(1, 2), (4, 8)]
    assert plan.num_tokens_per_req("target_verify") == 8 and plan.gamma == 7
    # a candidate outside the declared num_steps range is SR122, reported by check
    problems = make_registry().check({**config, "candidate_steps": [1, 9]})
    assert [p.code for p in problems] == ["SR122"] and "step 9" in problems[0].message


def test_hook_specreg_resolve_sizes():
    from specreg import Sizes

    class AllSizes:
        @hookimpl
        def specreg_resolve_sizes(self, configs, algorithm):
            if algorithm.name != "treealgo":
                return None
            return [
                Sizes(gamma=c.num_draft_tokens - 1,
                      target={"draft_decode": c.topk, "draft_extend": 1,
                              "target_verify": c.num_draft_tokens},
                      draft={"draft_decode": c.topk, "draft_extend": 2,
                             "target_verify": c.num_draft_tokens + 1})
                for c in configs
            ]

    plan = make_registry(AllSizes()).resolve(
        {"algorithm": "treealgo", "num_draft_tokens": 6, "candidate_steps": [1, 5]}
    )
    assert plan.num_tokens_per_req("draft_extend") == 1
    assert plan.num_tokens_per_req("target_verify", is_draft_worker=True) == 12  # 1 + 5 * 2 + 1
    assert plan.gamma == 10

    class WrongCount:
        @hookimpl
        def specreg_resolve_sizes(self, configs):
            return []

    with pytest.raises(ConfigError) as info:
        make_registry(WrongCount()).resolve({"algorithm": "treealgo"})
    assert info.value.code == "SR115"


def test_hook_specreg_make_verifier():
    class Verifier(TreeVerifierStub):
        def describe(self):
            return "tree verifier"

    class Make:
        @hookimpl
        def specreg_make_verifier(self, config, algorithm):
            return Verifier() if algorithm.drafting == "tree" else None

    registry = Registry()  # TREE's plugin without a verifier: a tree has no default one
    registry.register_plugin(SpecAndCachePlugin(TREE), "tree")
    with pytest.raises(SpecRegError) as info:
        registry.resolve({"algorithm": "treealgo"})
    assert info.value.code == "SR124" and "specreg_make_verifier" in str(info.value)
    assert "SR124" in {p.code for p in registry.check({"algorithm": "treealgo"})}
    plan = make_registry(Make()).resolve({"algorithm": "treealgo"})
    assert isinstance(plan.verifier, Verifier)
    assert plan.to_dict()["verifier"] == "tree verifier"


def test_hook_specreg_make_drafter():
    class Drafter(TreeDrafterStub):
        pass

    class Make:
        @hookimpl
        def specreg_make_drafter(self, config, algorithm):
            return Drafter() if algorithm.name == "treealgo" else None

    assert make_registry().resolve({"algorithm": "treealgo"}).drafter is None
    plan = make_registry(Make()).resolve({"algorithm": "treealgo"})
    assert isinstance(plan.drafter, Drafter)
    assert plan.to_dict()["drafter"] == "Drafter"


@pytest.mark.parametrize("hook", ["specreg_make_verifier", "specreg_make_drafter",
                                  "specreg_make_cache_swapper"])
def test_an_object_breaking_its_protocol_is_sr123_naming_the_plugin(hook):
    class ChainOnly:
        """A chain drafter's shape, returned for a tree algorithm: no start/step/tree."""

        gamma = 3

        def propose(self, history, lengths):
            return history[:, :3]

    broken = type("Broken", (), {hook: hookimpl(lambda self: ChainOnly())})()
    with pytest.raises(PluginError) as info:
        make_registry(broken).resolve({"algorithm": "treealgo", "cache": "memcache"})
    assert info.value.code == "SR123"
    assert "'extra0'" in str(info.value) and "ChainOnly" in str(info.value)


def test_hook_specreg_make_cache_swapper():
    class Swapper:
        layout = last_stats = None

        def __init__(self, steps, rows):
            self.steps, self.rows = steps, rows

        def new_host_cache(self, *args, **kwargs): ...

        def new_device_buffer(self, row_elems, dtype=None): ...

        def reset_request(self, slot): ...

        def write_tail(self, *args, **kwargs): ...

        def swap(self, *args, **kwargs): ...

    class Make:
        @hookimpl
        def specreg_make_cache_swapper(self, config, cache, resolution):
            if cache.name != "memcache":
                return None
            rows = config.cache_options.get("rows", cache.options["rows"])
            return Swapper(resolution.target[Phase.TARGET_VERIFY], rows)

    plan = make_registry(Make()).resolve(
        {"algorithm": "treealgo", "num_draft_tokens": 5, "cache": "memcache",
         "cache_options": {"rows": 32}}
    )
    assert plan.cache.name == "memcache"
    assert (plan.cache_swapper.steps, plan.cache_swapper.rows) == (5, 32)
    with pytest.raises(ConfigError) as info:
        make_registry(Make()).resolve(
            {"algorithm": "treealgo", "cache": "memcache", "cache_options": {"rowz": 1}}
        )
    assert info.value.code == "SR108" and "Did you mean 'rows'" in str(info.value)


def test_hook_errors_name_the_plugin():
    class Raises:
        @hookimpl
        def specreg_resolve_gamma(self, config, algorithm):
            raise ZeroDivisionError("oops")

    with pytest.raises(ConfigError) as info:
        make_registry(Raises()).resolve({"algorithm": "treealgo"})
    assert info.value.code == "SR114" and "'extra0'" in str(info.value)


def test_hook_returning_garbage_is_sr115():
    class Garbage:
        @hookimpl
        def specreg_num_tokens_per_req(self, config, phase):
            return "wide"

    with pytest.raises(ConfigError) as info:
        make_registry(Garbage()).resolve({"algorithm": "treealgo"})
    assert info.value.code == "SR115"


@pytest.mark.parametrize(
    "answer",
    [["not a problem object"], "not a list", problem("SR103", "one problem, not in a list")],
    ids=["list-of-str", "str", "problem"],
)
def test_validation_must_return_a_list_of_problems(answer):
    class Answers:
        @hookimpl
        def specreg_validate_config(self):
            return answer

    with pytest.raises(ConfigError) as info:
        make_registry(Answers()).resolve({"algorithm": "treealgo"})
    assert info.value.codes == ("SR128",) and "'extra0'" in str(info.value)


def test_wrappers_are_refused():
    class Wrapper:
        @hookimpl(wrapper=True)
        def specreg_resolve_gamma(self):
            return (yield)

    registry = Registry()
    assert registry.register_plugin(Wrapper(), "wrapper") is None
    assert registry.failures[0].problem.code == "SR111"
    with pytest.raises(PluginError):
        Registry(strict=True).register_plugin(Wrapper(), "wrapper")
