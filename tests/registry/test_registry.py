"""Loading through real entry points of the installed specreg-testplugins distribution."""

import threading

import pytest

from specreg import ConfigError, PluginError, Registry, UnknownNameError
from specreg.registry.registry import SHARED_REGISTRIES, RegistryCache

TEST_DIST = "specreg-testplugins"


def _codes(registry):
    return sorted(f.problem.code for f in registry.failures)


def test_allowlist_loads_only_the_named_entry_points(load_registry):
    registry = load_registry({"toy"})
    assert [a.name for a in registry.algorithms()] == ["toychain"]
    spec = registry.get_algorithm("TC")  # alias, any case
    assert spec.name == "toychain"
    assert spec.origin.plugin == "toy"
    assert spec.origin.distribution == TEST_DIST
    assert spec.origin.version == "1.2.3"
    assert registry.failures == []
    names = {p.name: p for p in registry.plugins()}
    assert names["toy"].version == "1.2.3"
    assert names["toy"].hooks == ("specreg_num_tokens_per_req", "specreg_register_algorithms")


def test_empty_allowlist_loads_nothing(load_registry, monkeypatch):
    monkeypatch.setenv("SPECREG_PLUGINS", "")
    registry = Registry.load(fresh=True)
    assert registry.algorithms() == []
    assert [p.name for p in registry.plugins()] == ["specreg.default"]


def test_env_allowlist_is_honoured(load_registry, monkeypatch):
    monkeypatch.setenv("SPECREG_PLUGINS", " toy , broken")
    registry = Registry.load(fresh=True)
    assert [a.name for a in registry.algorithms()] == ["toychain"]
    assert _codes(registry) == ["SR110"]


def test_broken_plugin_beside_good_ones_is_recorded_and_skipped(load_registry):
    registry = load_registry({"toy", "broken", "badhook", "misspelt", "raiser", "badspec"})
    assert [a.name for a in registry.algorithms()] == ["toychain"]
    by_plugin = {f.plugin: f for f in registry.failures}
    assert by_plugin["broken"].problem.code == "SR110"
    assert by_plugin["broken"].distribution == TEST_DIST
    assert "ImportError" in by_plugin["broken"].problem.message
    assert by_plugin["badhook"].problem.code == "SR111"
    assert "batch_size" in by_plugin["badhook"].problem.message
    assert by_plugin["misspelt"].problem.code == "SR111"
    assert "specreg_resolve_gama" in by_plugin["misspelt"].problem.message
    assert by_plugin["raiser"].problem.code == "SR114"
    assert "boom while registering" in by_plugin["raiser"].problem.message
    assert by_plugin["badspec"].problem.code == "SR113"
    # the skipped plugins are not left half-registered
    plugin_names = {p.name for p in registry.plugins()}
    assert {"broken", "badhook", "misspelt"}.isdisjoint(plugin_names)
    plan = registry.resolve({"algorithm": "toychain"})
    assert plan.gamma == 4


def test_strict_mode_raises_on_the_first_broken_plugin(load_registry):
    with pytest.raises(PluginError) as info:
        load_registry({"toy", "broken"}, strict=True)
    assert info.value.code == "SR110"
    with pytest.raises(PluginError) as info:
        load_registry({"toy", "dupe"}, strict=True)
    assert info.value.code == "SR112"
    assert load_registry({"toy"}, strict=True).failures == []


def test_duplicate_name_names_both_distributions(load_registry):
    registry = load_registry({"toy", "dupe"})
    (failure,) = registry.failures
    assert failure.problem.code == "SR112"
    message = failure.problem.message
    assert "'toy'" in message and "'dupe'" in message and TEST_DIST in message
    with pytest.raises(UnknownNameError) as info:
        registry.get_algorithm("toychain")
    assert info.value.code == "SR112"
    with pytest.raises(ConfigError) as info:
        registry.resolve({"algorithm": "toychain"})
    assert info.value.code == "SR112"


def test_explicit_override_wins_and_shadows_the_original_hooks(load_registry):
    registry = load_registry({"toy", "override"})
    assert registry.failures == []
    spec = registry.get_algorithm("toychain")
    assert spec.description == "replacement" and spec.origin.plugin == "override"
    plan = registry.resolve({"algorithm": "toychain"})
    # override's gamma hook answers (n - 2, not the default n - 1); toy's width hook (draft
    # worker n-1) is shadowed
    assert plan.gamma == 1
    assert plan.num_tokens_per_req("target_verify", is_draft_worker=True) == 3
    # the original's alias stays with the original only where the override does not claim it
    assert registry.get_algorithm("tc").origin.plugin == "toy"


def test_in_process_plugin_name_clash_is_refused(load_registry):
    registry = load_registry({"toy"})
    import specreg_testplugins.dupe as dupe

    assert registry.register_plugin(dupe, name="toy") is None
    assert any(f.problem.code == "SR112" for f in registry.failures)


def test_load_is_idempotent_and_shared(load_registry, monkeypatch):
    monkeypatch.setenv("SPECREG_PLUGINS", "toy")
    SHARED_REGISTRIES.clear()
    first = Registry.load()
    assert Registry.load() is first
    results = []
    threads = [threading.Thread(target=lambda: results.append(Registry.load())) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(r is first for r in results)
    assert Registry.load(fresh=True) is not first
    SHARED_REGISTRIES.clear()


def test_a_shared_registry_is_read_only(load_registry, monkeypatch):
    """register_plugin on the registry every Registry.load() caller shares is SR109; a fresh
    registry is the caller's own and takes the plugin."""
    import specreg_testplugins.dupe as dupe

    monkeypatch.setenv("SPECREG_PLUGINS", "toy")
    shared = Registry.load(cache=RegistryCache())
    assert shared.shared
    before = [a.name for a in shared.algorithms()]
    for change in (
        lambda: shared.register_plugin(dupe, name="mine"),
        lambda: shared.unregister_plugin("toy"),
        lambda: shared.load_entrypoints(allowlist=frozenset({"toy"})),
    ):
        with pytest.raises(PluginError) as info:
            change()
        assert info.value.code == "SR109" and "fresh=True" in str(info.value)
    assert [a.name for a in shared.algorithms()] == before and shared.failures == []
    own = Registry.load(fresh=True)
    assert not own.shared and own.register_plugin(dupe, name="mine") == "mine"


def test_a_registry_cache_belongs_to_its_owner(load_registry, monkeypatch):
    monkeypatch.setenv("SPECREG_PLUGINS", "toy")
    mine, theirs = RegistryCache(), RegistryCache()
    first = Registry.load(cache=mine)
    assert Registry.load(cache=mine) is first and len(mine) == 1
    assert Registry.load(cache=theirs) is not first
    mine.clear()
    assert len(mine) == 0 and Registry.load(cache=mine) is not first


def test_loading_twice_into_one_registry_does_not_duplicate(load_registry):
    registry = load_registry({"toy"})
    registry.load_entrypoints(allowlist=frozenset({"toy"}))
    assert [a.name for a in registry.algorithms()] == ["toychain"]
    assert registry.failures == []


def _load_in_child(site, queue):
    import sys

    sys.path.insert(0, site)
    from specreg import Registry

    registry = Registry.load(allowlist={"toy"}, fresh=True)
    queue.put([a.name for a in registry.algorithms()])


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_loading_in_child_processes(testplugins_site, method):
    import multiprocessing

    ctx = multiprocessing.get_context(method)
    queue = ctx.Queue()
    proc = ctx.Process(target=_load_in_child, args=(str(testplugins_site), queue))
    proc.start()
    names = queue.get(timeout=60)
    proc.join(timeout=60)
    assert proc.exitcode == 0
    assert names == ["toychain"]


def test_hanging_import_times_out_and_the_others_load(load_registry, testplugins_site, monkeypatch):
    import time

    monkeypatch.syspath_prepend(str(testplugins_site))
    started = time.perf_counter()
    registry = Registry.load(allowlist={"toy", "hang", "slow"}, fresh=True, import_timeout=2.0)
    assert time.perf_counter() - started < 15
    by_plugin = {f.plugin: f.problem.code for f in registry.failures}
    assert by_plugin == {"hang": "SR118"}
    assert {a.name for a in registry.algorithms()} == {"toychain", "slowchain"}
    info = {p.name: p for p in registry.plugins()}
    assert info["slow"].slow and info["slow"].load_seconds >= 1.2
    assert not info["toy"].slow
