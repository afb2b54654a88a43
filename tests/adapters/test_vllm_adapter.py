"""The vLLM adapter loaded by vLLM's own plugin loader, and the custom_class proposer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adapters.conftest import runs_per_mode

HERE = Path(__file__).parent
PROPOSER = "specreg.adapters.vllm_proposers.ngram"


@pytest.fixture(scope="module")
def cases(model_dirs):
    llama = str(model_dirs["llama"])
    dspark = str(model_dirs["dspark-draft"])
    # the last 5 tokens (vLLM's prompt_lookup_min = max = 5) occurred before, followed by 8 9 1
    history = [1, 2, 3, 4, 5, 8, 9, 1, 2, 3, 4, 5]
    return [
        {"id": 0, "target": llama, "spec": {"method": "eagle", "model": llama}},
        {"id": 1, "target": llama, "spec": {"method": "eagle", "model": llama, "num_speculative_tokens": 2}},
        {"id": 2, "target": llama, "spec": {"method": "dspark", "model": dspark, "num_speculative_tokens": 1}},
        {"id": 3, "target": llama, "spec": {"method": "custom_class", "model": PROPOSER,
                                            "num_speculative_tokens": 3},
         "propose": {"sampled": [[3], [], [4]], "histories": [history, [7, 7], [1, 2, 3, 4]]}},
    ]


@pytest.fixture(scope="module")
def runs(framework_env, cases):
    return runs_per_mode(framework_env, str(HERE / "vllm_grid.py"), cases, "SPECREG_VLLM")


def test_vllms_loader_runs_the_adapter_in_enforce_mode(runs):
    out = runs("enforce")
    assert out["adapter_installed"] is True
    unset, given, dspark, custom = out["results"]
    assert unset["error"] is None and unset["k"] == 3  # filled from plan.gamma; vLLM alone refuses
    assert given["k"] == 2  # a given k is kept
    assert dspark["error"] == "ConfigError" and "SR305" in dspark["message"]
    assert custom["error"] is None and custom["method"] == "custom_class"


def test_off_leaves_vllm_exactly_as_without_specreg(runs):
    out = runs(None)
    assert out["adapter_installed"] is False
    unset, given, dspark, _ = out["results"]
    assert unset["error"] == "ValidationError"
    assert given["k"] == 2 and dspark["error"] is None and dspark["k"] == 1


def test_shadow_lets_vllm_decide(runs):
    out = runs("shadow")
    assert out["adapter_installed"] is True
    unset, _, dspark, _ = out["results"]
    assert unset["error"] == "ValidationError" and dspark["k"] == 1


def test_custom_class_proposer_runs_the_ngram_plugins_drafter(runs):
    drafts = runs(None)["results"][3]["drafts"]  # the proposer is vLLM's to load, in any mode
    assert runs("enforce")["results"][3]["drafts"] == drafts
    # request 0: the built-in ngram's vLLM rule; request 1 is not decoding (no drafts);
    # request 2 has no earlier match, so nothing is proposed (as vLLM's own ngram proposer)
    assert drafts == [[8, 9, 1], [], []]
