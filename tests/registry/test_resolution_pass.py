"""One resolution pass per config: each hook at most once per plugin, the draft config read and
parsed once, and no import circle between the registry, the resolver and the plan."""

from __future__ import annotations

import ast
import json
from collections import Counter
from pathlib import Path

import pytest

import specreg.contract.config
from specreg import ConfigError, Registry

ROOT = Path(__file__).parents[2]
DRAFT = {"vocab_size": 64, "block_size": 8, "markov_rank": 8, "markov_head_type": "vanilla",
         "mask_token_id": 4}
CONFIGS = {
    "eagle": {"algorithm": "eagle", "num_steps": 3, "topk": 4, "num_draft_tokens": 8},
    "eagle adaptive": {"algorithm": "eagle", "num_steps": 3, "topk": 4,
                       "candidate_steps": [1, 3, 5]},
    "dspark adaptive": {"algorithm": "dspark", "candidate_steps": [1, 3]},
    "eagle+hisparse": {"algorithm": "eagle", "cache": "hisparse",
                       "cache_options": {"hot_size": 4096, "top_k": 2048}},
}


@pytest.fixture
def counted(monkeypatch):
    """A fresh registry whose every hook implementation counts its calls."""
    registry = Registry.load(fresh=True)
    calls: Counter[tuple[str, str]] = Counter()
    for caller in registry._pm.hook.__dict__.values():
        for impl in getattr(caller, "get_hookimpls", list)():
            def counting(*args, _f=impl.function, _key=(impl.plugin_name, caller.name), **kw):
                calls[_key] += 1
                return _f(*args, **kw)

            monkeypatch.setattr(impl, "function", counting)
    return registry, calls


@pytest.mark.parametrize("name", list(CONFIGS))
def test_each_hook_runs_at_most_once_per_plugin_per_resolve(counted, tmp_path, name):
    registry, calls = counted
    config = dict(CONFIGS[name])
    if config["algorithm"] == "dspark":
        path = tmp_path / "config.json"
        path.write_text(json.dumps(DRAFT))
        config["draft_config"] = str(path)
    registry.resolve(config)
    twice = {key: n for key, n in calls.items() if n > 1}
    assert not twice, twice
    made = {hook for (_, hook) in calls if hook.startswith("specreg_make_")}
    assert {"specreg_make_verifier", "specreg_make_drafter"} <= made
    hooks = {hook for (_, hook) in calls}
    assert ("specreg_resolve_candidates" in hooks) == ("candidate_steps" in config)
    # the per-config compatibility hooks are not called when no plugin implements them
    assert not hooks & {"specreg_resolve_gamma", "specreg_num_tokens_per_req"}
    # only the plugins the config concerns: its algorithm's, its cache's, and the default
    owner = registry.get_algorithm(config["algorithm"]).origin.plugin
    concerned = {owner, "specreg.default"} | ({"hisparse"} if "cache" in config else set())
    assert {plugin for (plugin, _) in calls} <= concerned
    print(name, dict(sorted(calls.items())))


def test_the_draft_config_is_read_and_parsed_once(monkeypatch, tmp_path):
    from specreg_dspark import plugin as dspark_plugin

    path = tmp_path / "config.json"
    path.write_text(json.dumps(DRAFT))
    reads, parses = [], []
    real_read = specreg.contract.config.load_json_object
    monkeypatch.setattr(
        specreg.contract.config, "load_json_object", lambda p: reads.append(p) or real_read(p)
    )
    parse, analyse = dspark_plugin._ANALYSERS["dspark"]
    monkeypatch.setitem(
        dspark_plugin._ANALYSERS, "dspark",
        (lambda mapping: parses.append(1) or parse(mapping), analyse),
    )
    plan = Registry.load(fresh=True).resolve(
        {"algorithm": "dspark", "draft_config": str(path), "candidate_steps": [1, 3]}
    )
    assert (len(reads), len(parses)) == (1, 1)
    assert plan.gamma == plan.verifier.gamma == 8  # block_size 8, dense layout
    assert [c.gamma for c in plan.candidates] == [1, 3]


def test_a_legacy_per_config_hook_still_answers():
    from specreg import hookimpl

    class Gamma:
        @hookimpl
        def specreg_resolve_gamma(self, config, algorithm):
            return 2 if algorithm.name == "eagle" else None

    registry = Registry.load(fresh=True)
    registry.register_plugin(Gamma(), "legacy")
    plan = registry.resolve({"algorithm": "eagle", "candidate_steps": [2, 3]})
    assert plan.gamma == 2 and all(c.gamma == 2 for c in plan.candidates)
    with pytest.raises(ConfigError) as info:  # candidate 1 verifies 2 tokens: gamma 2 cannot run
        registry.resolve({"algorithm": "eagle", "candidate_steps": [1, 3]})
    assert info.value.codes == ("SR125",) and "plugin 'legacy'" in str(info.value)
    assert "specreg_resolve_gamma" in str(info.value) and "candidate step 1" in str(info.value)


def _imports(path: Path) -> set[str]:
    """Every module a file imports, including under `if TYPE_CHECKING:` and in functions."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.add(node.module)
            found |= {f"{node.module}.{alias.name}" for alias in node.names}
    return found


def test_no_module_under_specreg_imports_a_shipped_plugin():
    plugins = {p.name for p in (ROOT / "plugins").iterdir() if (p / "__init__.py").exists()}
    assert plugins  # the scan looks for something that exists
    offenders = {
        str(path.relative_to(ROOT)): sorted(m for m in _imports(path) if m.split(".")[0] in plugins)
        for path in (ROOT / "specreg").rglob("*.py")
    }
    assert not {k: v for k, v in offenders.items() if v}


def test_the_scan_catches_a_plugin_import(tmp_path):
    bad = tmp_path / "bad.py"
    bad.write_text("from typing import TYPE_CHECKING\nif TYPE_CHECKING:\n"
                   "    from specreg_eagle.tree import build_tree\n")
    assert "specreg_eagle.tree" in _imports(bad)


def test_registry_resolver_and_plan_import_no_circle():
    """The registry uses the resolver; the resolver uses the plan; neither looks back."""
    paths = {"registry": "registry/registry", "resolver": "registry/resolver", "plan": "registry/plan",
             "resolution": "contract/resolution", "protocols": "contract/protocols"}
    modules = {name: _imports(ROOT / "specreg" / f"{path}.py") for name, path in paths.items()}
    assert "specreg.registry.resolver" in modules["registry"]
    assert not any(m.startswith("specreg.registry.registry") for m in modules["resolver"])
    for name in ("plan", "resolution", "protocols"):
        assert not any(
            m.startswith(("specreg.registry.registry", "specreg.registry.resolver")) for m in modules[name]
        ), name


def _cli(*args: str):
    import subprocess
    import sys

    return subprocess.run([sys.executable, "-m", "specreg", *args], capture_output=True,
                          text=True, check=False)


def test_cli_check_reports_a_candidate_the_algorithm_cannot_serve():
    done = _cli("check", "--speculative-algorithm", "dspark", "--speculative-num-draft-tokens",
                "4", "--speculative-candidate-steps", "1,5")
    assert done.returncode == 1 and "SR312" in done.stdout + done.stderr


def test_cli_plan_of_the_adaptive_tree_repro_agrees_with_its_verifier():
    done = _cli("plan", "--json", "--speculative-algorithm", "eagle", "--speculative-eagle-topk",
                "4", "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "16",
                "--speculative-candidate-steps", "1,3,5")
    assert done.returncode == 0, done.stderr
    data = json.loads(done.stdout)
    assert data["widths"]["target"]["target_verify"] == 16 and data["gamma"] == 15
    assert "num_draft_tokens=16" in data["verifier"]
    assert [c["num_draft_tokens"] for c in data["candidates"]] == [5, 16, 16]
