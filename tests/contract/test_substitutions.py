"""The runtime-substitution switch: names, the config field, the plan record, installation."""

from __future__ import annotations

import json
import logging
import sys
import types

import pytest

from specreg.adapters import substitution_runtime as runtime
from specreg.adapters.common import FrameworkAdapter, load_adapter
from specreg.contract.config import SpecConfig
from specreg.errors import ConfigError, PluginError
from specreg.framework_args.rules import hisparse_runtime_problems
from specreg.registry.registry import Registry
from specreg.contract.substitutions import Substitution, names_of, parse
from tests.support.cli import specreg


@pytest.fixture(scope="module")
def registry():
    return Registry.load()


@pytest.fixture(scope="module")
def table(registry):
    """The substitutions the loaded plugins registered: the core's and HiSparse's."""
    return registry.substitutions()


def test_names_per_framework(table):
    assert names_of(table, "sglang") == ("hisparse_swap", "tree_verify")
    assert names_of(table, "vllm") == ("rejection_sampler",)
    assert set(names_of(table)) == set(table)


def test_each_substitution_comes_from_its_plugin(table):
    from specreg_hisparse import sglang_seam

    assert table["hisparse_swap"] is sglang_seam.SUBSTITUTION
    assert table["hisparse_swap"].installer is sglang_seam.install
    assert table["tree_verify"].installer == "specreg.adapters.sglang_tree_verify:install"
    without = Registry.load(allowlist=["eagle"], fresh=True).substitutions()
    assert set(without) == {"tree_verify", "rejection_sampler"}  # the core's stay


@pytest.mark.parametrize(
    ("text", "framework", "names", "codes"),
    [
        ("", "sglang", (), []),
        ("off", "sglang", (), []),
        ("tree_verify, hisparse_swap,tree_verify", "sglang", ("hisparse_swap", "tree_verify"), []),
        ("all", "sglang", ("hisparse_swap", "tree_verify"), []),
        ("all", "vllm", ("rejection_sampler",), []),
        ("hisparse", "sglang", ("hisparse",), ["SR181"]),
        ("rejection_sampler", "sglang", ("rejection_sampler",), ["SR181"]),
        ("tree_verify,nope,hisparse_swap_", "sglang", None, ["SR181", "SR181"]),
    ],
)
def test_parse(table, text, framework, names, codes):
    found, problems = parse(text, table, framework)
    if names is not None:
        assert found == names
    assert [p.code for p in problems] == codes


def test_other_frameworks_name_says_whose_it_is(table):
    _, (found,) = parse("rejection_sampler", table, "sglang")
    assert "vllm seam, not a SGLang one" in found.render()
    assert "SPECREG_SGLANG_SUBSTITUTE=hisparse_swap,tree_verify" in found.render()


def test_config_field_normalises_and_validates(registry):
    config = SpecConfig(algorithm="eagle", substitutions="tree_verify,hisparse_swap,tree_verify")
    assert config.substitutions == ("hisparse_swap", "tree_verify")
    # which names exist is the registry's answer: its plugins registered them
    misspelt = SpecConfig(algorithm="eagle", substitutions=["tree_verfy", "rejection_sampler"])
    with pytest.raises(ValueError) as info:
        registry.resolve(misspelt)
    assert isinstance(info.value, ConfigError)
    assert info.value.codes == ("SR181",)
    assert "Did you mean 'tree_verify'?" in str(info.value)
    assert [p.code for p in registry.check(misspelt)] == ["SR181"]
    with pytest.raises(ConfigError) as info:
        SpecConfig(algorithm="eagle", substitutions=3)
    assert info.value.codes == ("SR181",)


def test_a_plugins_substitution_needs_the_plugin_loaded():
    eagle_only = Registry.load(allowlist=["eagle"], fresh=True)
    with pytest.raises(ConfigError) as info:
        eagle_only.resolve({"algorithm": "eagle", "substitutions": ["hisparse_swap"]})
    assert info.value.codes == ("SR181",)
    assert eagle_only.resolve({"algorithm": "eagle", "substitutions": ["tree_verify"]})


def test_plan_records_substitutions_and_round_trips(registry):
    plan = registry.resolve({"algorithm": "eagle", "substitutions": ["tree_verify"]})
    assert plan.config.substitutions == ("tree_verify",)
    assert plan.fingerprint()["substitutions"] == ["tree_verify"]
    assert registry.resolve(plan.config) == plan
    assert registry.resolve(plan.to_dict()["config"]) == plan
    plain = registry.resolve({"algorithm": "eagle"})
    assert plain.fingerprint() != plan.fingerprint()  # a rank without it is told apart (SR165)


def test_hisparse_swap_lifts_sglangs_manager_limits_only():
    facts = {"enable_hisparse": True, "disable_radix_cache": True,
             "target_architecture": "DeepseekV32ForCausalLM", "hisparse_config": {"top_k": 512}}
    assert {p.code for p in hisparse_runtime_problems(facts, 1, 8)} == {"SR167", "SR168"}
    assert hisparse_runtime_problems(facts, 1, 8, ("hisparse_swap",)) == []
    assert hisparse_runtime_problems(facts, 1, 8, ("tree_verify",)) != []
    # SGLang's other HiSparse rules stay: they are not the manager's
    assert [p.code for p in hisparse_runtime_problems(
        {**facts, "disable_radix_cache": False}, 1, 8, ("hisparse_swap",))] == ["SR170"]


def test_cli_check_substitute(model_dirs):
    base = ["check", "--json", "--speculative-algorithm", "EAGLE", "--model-path",
            str(model_dirs["dsa"]), "--enable-hisparse", "--disable-radix-cache",
            "--speculative-num-steps", "7", "--speculative-eagle-topk", "1"]
    without = specreg(*base)
    assert without.returncode == 1
    assert {e["code"] for e in json.loads(without.stdout)["errors"]} == {"SR167", "SR168"}
    lifted = specreg(*base, "--substitute", "hisparse_swap")
    assert lifted.returncode == 0, lifted.stdout + lifted.stderr
    mistyped = specreg(*base, "--substitute", "hisparse-swap")
    errors = json.loads(mistyped.stdout)["errors"]
    assert mistyped.returncode == 1
    # refused first: whether SR167/SR168 (the swap manager's limits) apply depends on the
    # substitution the typo hides, so they are not reported as if it were off
    assert [e["code"] for e in errors] == ["SR181"]
    assert "Did you mean 'hisparse_swap'?" in errors[0]["message"]
    assert "--substitute" in errors[0]["fix"]


def test_switch_needs_enforce(monkeypatch):
    monkeypatch.setenv("SPECREG_SGLANG_SUBSTITUTE", "tree_verify")
    assert runtime.from_env("sglang", "enforce") == ("tree_verify",)
    with pytest.raises(ConfigError) as info:
        runtime.from_env("sglang", "shadow")
    assert info.value.codes == ("SR181",)
    assert "SPECREG_SGLANG=enforce" in str(info.value)
    monkeypatch.delenv("SPECREG_SGLANG_SUBSTITUTE")
    assert runtime.from_env("sglang", "shadow") == ()


@pytest.fixture
def fake_substitution(monkeypatch):
    """A substitution whose installer records its calls, in a throw-away module."""
    calls: list[object] = []
    module = types.ModuleType("fake_installer")
    module.install = calls.append  # type: ignore[attr-defined]
    monkeypatch.setitem(sys.modules, "fake_installer", module)
    table = {
        "fake": Substitution("fake", "sglang", "test", "fake_installer:install"),
        "broken": Substitution("broken", "sglang", "test", "no_such_mod:install"),
        "called": Substitution("called", "sglang", "test", calls.append),
    }
    monkeypatch.setattr(runtime, "registry_table", lambda: table)
    monkeypatch.setattr(runtime, "INSTALLED", {})
    return calls


def test_install_all_once_per_process_and_logs(fake_substitution, caplog):
    with caplog.at_level(logging.WARNING, logger="specreg.adapters"):
        assert runtime.install_all("sglang", ("fake",), "the plan") == ("fake",)
        assert runtime.install_all("sglang", ("fake",)) == ("fake",)
    assert fake_substitution == ["the plan"]
    (line,) = [r.getMessage() for r in caplog.records]
    assert "SGLang runtime substitutions active: fake" in line
    assert runtime.active() == ("fake",)


def test_a_callable_installer_is_called_as_registered(fake_substitution):
    assert runtime.install_all("sglang", ("called",), "the plan") == ("called",)
    assert fake_substitution == ["the plan"]
    assert runtime.INSTALLED["called"].endswith(":list.append")


def test_missing_installer_is_sr182(fake_substitution):
    with pytest.raises(PluginError) as info:
        runtime.install_all("sglang", ("broken",))
    assert info.value.codes == ("SR182",)
    assert runtime.active() == ()


def test_require_applied():
    def original():
        pass

    def mine():
        pass

    runtime.require_applied("sglang", "x.y", mine, mine)
    with pytest.raises(PluginError) as info:
        runtime.require_applied("sglang", "x.y", original, mine)
    assert info.value.codes == ("SR182",)
    assert "did not apply the hook" in str(info.value)


class _Recorder(FrameworkAdapter):
    installed: list = []  # noqa: RUF012 - the test reads it back
    words = "sglang"
    variable = "SPECREG_SGLANG"

    def install(self):
        _Recorder.installed.append(self)


def test_load_adapter_installs_switch(fake_substitution, monkeypatch):
    monkeypatch.setattr(_Recorder, "installed", [])
    monkeypatch.setenv("SPECREG_SGLANG", "enforce")
    monkeypatch.setenv("SPECREG_SGLANG_SUBSTITUTE", "fake")
    load_adapter(_Recorder)
    (adapter,) = _Recorder.installed
    assert adapter.substitutions == ("fake",) and adapter.refusal is None
    assert fake_substitution == [None]


def test_mistyped_switch_installs_a_refusing_adapter(monkeypatch):
    monkeypatch.setattr(_Recorder, "installed", [])
    monkeypatch.setenv("SPECREG_SGLANG", "enforce")
    monkeypatch.setenv("SPECREG_SGLANG_SUBSTITUTE", "tree-verify")
    with pytest.raises(ConfigError) as info:
        load_adapter(_Recorder)
    assert info.value.codes == ("SR181",)
    (adapter,) = _Recorder.installed
    assert adapter.refusal is not None and adapter.refusal.codes == ("SR181",)


def test_off_reads_no_switch(monkeypatch):
    monkeypatch.setattr(_Recorder, "installed", [])
    monkeypatch.delenv("SPECREG_SGLANG", raising=False)
    monkeypatch.setenv("SPECREG_SGLANG_SUBSTITUTE", "nonsense")  # the adapter is off: not read
    load_adapter(_Recorder)
    assert _Recorder.installed == []
