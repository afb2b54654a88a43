
from __future__ import annotations

import subprocess
import sys

import pytest

from specreg.registry.registry import Registry
from tests.support.cli import plan_json, specreg


@pytest.fixture(scope="module")
def registry():
    return Registry.load(allowlist={"eagle"}, fresh=True)


def test_plugin_imports_without_torch():
    code = "import specreg_eagle.plugin, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)


def test_widths_topk4(registry):
    plan = registry.resolve({"algorithm": "eagle", "num_steps": 3, "topk": 4, "num_draft_tokens": 8})
    for draft in (False, True):
        assert plan.num_tokens_per_req("draft_decode", draft) == 4
        assert plan.num_tokens_per_req("draft_extend", draft) == 8
        assert plan.num_tokens_per_req("target_verify", draft) == 8
    assert plan.gamma == 7
    assert "EagleVerifier" in plan.to_dict()["verifier"]


def test_defaults_like_sglang(registry):
    plan = registry.resolve({"algorithm": "eagle"})
    assert (plan.config.num_steps, plan.config.topk, plan.config.num_draft_tokens) == (3, 1, 4)


def test_inferred_tree_width(registry):
    plan = registry.resolve({"algorithm": "eagle", "num_steps": 3, "topk": 4})
    assert plan.config.num_draft_tokens == 13  # min(1 + 4 + 2*16, 1 + 3*4)
    plan = registry.resolve({"algorithm": "eagle", "num_steps": 1, "topk": 4})
    assert plan.config.num_draft_tokens == 5


def test_chain_mismatch_code(registry):
    codes = [p.code for p in registry.check({"algorithm": "eagle", "num_steps": 3, "topk": 1, "num_draft_tokens": 6})]
    assert codes == ["SR201"]
    assert registry.resolve({"algorithm": "eagle", "num_steps": 5, "topk": 1}).config.num_draft_tokens == 6


def test_too_many_draft_tokens(registry):
    problems = registry.check({"algorithm": "eagle", "num_steps": 1, "topk": 2, "num_draft_tokens": 8})
    assert [p.code for p in problems] == ["SR200"]
    assert "3" in problems[0].accepted


def test_ranges_left_to_default_plugin(registry):
    codes = [p.code for p in registry.check({"algorithm": "eagle", "topk": 0})]
    assert codes == ["SR103"]
    codes = [p.code for p in registry.check({"algorithm": "eagle", "num_draft_tokens": 1})]
    assert codes == ["SR103"]


def test_alias_and_eagle3(registry):
    assert registry.get_algorithm("nextn").name == "eagle"
    plan = registry.resolve({"algorithm": "nextn", "num_steps": 2, "topk": 2, "num_draft_tokens": 5})
    assert plan.algorithm.name == "eagle"
    spec = registry.get_algorithm("eagle3")
    assert spec.uses_target_hidden_states and spec.drafting == "tree"
    assert set(spec.verify_rules) == {"tree_greedy", "tree_sampling", "greedy", "chain_sampling"}


def test_hooks_ignore_other_algorithms():
    from specreg_eagle import plugin

    from specreg.contract.specs import AlgorithmSpec

    other = AlgorithmSpec(name="other", drafting="chain", verify_rules=("greedy",))
    from specreg.contract.config import SpecConfig

    cfg = SpecConfig(algorithm="other")
    assert plugin.specreg_resolve_config(cfg, other) is None
    assert plugin.specreg_resolve_candidates(cfg, other) is None
    assert plugin.specreg_validate_config(cfg, other, None, None) is None
    assert plugin.specreg_make_verifier(cfg, other, None) is None
    assert plugin.specreg_make_drafter(cfg, other, None) is None


def test_eagle_tree_widths():
    data = plan_json("--speculative-algorithm", "eagle", "--speculative-num-steps", "3",
                     "--speculative-eagle-topk", "4", "--speculative-num-draft-tokens", "8")
    for worker in ("target", "draft"):
        assert data["widths"][worker] == {"draft_decode": 4, "draft_extend": 8, "target_verify": 8}


def test_eagle_chain_mismatch_is_rewritten_as_sglang_does_with_a_coded_notice():
    # SGLang silently sets draft tokens to steps + 1 under topk 1; specreg adopts it and says so.
    result = specreg("check", "--speculative-algorithm", "eagle", "--speculative-eagle-topk", "1",
                     "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "6")
    assert result.returncode == 0 and "SR162" in result.stdout and "Fix:" in result.stdout
    data = plan_json("--speculative-algorithm", "eagle", "--speculative-eagle-topk", "1",
                     "--speculative-num-steps", "3", "--speculative-num-draft-tokens", "6")
    assert data["config"]["num_draft_tokens"] == 4
