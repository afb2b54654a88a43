"""The vLLM adapter loaded by vLLM's own plugin loader, and the custom_class proposer."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.adapters.conftest import runs_per_mode

HERE = Path(__file__).parent
PROPOSERS = "specreg.adapters.vllm_proposers."
MAX_MODEL_LEN = 512  # the tiny llama's max_position_embeddings


@pytest.fixture(scope="module")
def cases(model_dirs):
    llama = str(model_dirs["llama"])
    dspark = str(model_dirs["dspark-draft-prefixed"])  # block 5: gamma 5
    # the last 5 tokens (vLLM's prompt_lookup_min = max = 5) occurred before, followed by 8 9 1
    history = [1, 2, 3, 4, 5, 8, 9, 1, 2, 3, 4, 5]
    full = [1, 2] * (MAX_MODEL_LEN // 2)  # at the model's maximum length: no drafts
    near = [1, 2] * (MAX_MODEL_LEN // 2 - 1)  # 2 tokens of room: 2 drafts
    return [
        {"id": 0, "target": llama, "spec": {"method": "eagle", "model": llama}},
        {"id": 1, "target": llama, "spec": {"method": "eagle", "model": llama, "num_speculative_tokens": 2}},
        {"id": 2, "target": llama, "spec": {"method": "dspark", "model": dspark, "num_speculative_tokens": 1}},
        {"id": 3, "target": llama, "spec": {"method": "custom_class", "model": PROPOSERS + "ngram",
                                            "num_speculative_tokens": 3},
         "propose": {"sampled": [[3], [], [4], [2], [2]],
                     "histories": [history, [7, 7], [1, 2, 3, 4], full, near]}},
        {"id": 4, "target": llama, "spec": {"method": "custom_class", "model": PROPOSERS + "dflash",
                                            "num_speculative_tokens": 3},
         "propose": {"sampled": [[3]], "histories": [history]}},
        {"id": 5, "target": llama, "spec": {"method": "custom_class", "model": PROPOSERS + "suffix",
                                            "num_speculative_tokens": 4},
         "propose": {"sampled": [[3], [7]], "histories": [[9, 1, 2, 3, 4, 5, 6, 1, 2, 3],
                                                          [7, 8, 9]]}},
    ]


@pytest.fixture(scope="module")
def runs(framework_env, cases):
    return runs_per_mode(framework_env, str(HERE / "vllm_load.py"), cases, "SPECREG_VLLM")


def test_vllms_loader_runs_the_adapter_in_enforce_mode(runs):
    out = runs("enforce")
    assert out["adapter_installed"] is True and out["load_error"] is None
    unset, given, dspark, custom, _, _ = out["results"]
    assert unset["error"] is None and unset["k"] == 3  # filled from plan.gamma; vLLM alone refuses
    assert given["k"] == 2  # a given k is kept
    assert dspark["error"] == "ConfigError" and "SR305" in dspark["message"]
    assert custom["error"] is None and custom["method"] == "custom_class"


def test_messages_under_vllm_name_vllms_keys(runs):
    """SR305 under vLLM: the checkpoint's gamma 5 is num_speculative_tokens 5, not SGLang's
    --speculative-num-draft-tokens 6."""
    message = runs("enforce")["results"][2]["message"]
    assert "--speculative" not in message, message
    assert "set num_speculative_tokens 5" in message and "num_speculative_tokens 1" in message


def test_off_leaves_vllm_exactly_as_without_specreg(runs):
    out = runs(None)
    assert out["adapter_installed"] is False and out["load_error"] is None
    unset, given, dspark, _, _, _ = out["results"]
    assert unset["error"] == "ValidationError"
    assert given["k"] == 2 and dspark["error"] is None and dspark["k"] == 1


def test_shadow_lets_vllm_decide(runs):
    out = runs("shadow")
    assert out["adapter_installed"] is True
    unset, _, dspark, _, _, _ = out["results"]
    assert unset["error"] == "ValidationError" and dspark["k"] == 1


def test_a_mistyped_mode_stops_vllm_and_every_later_engine_args(runs):
    """SPECREG_VLLM=enforced: vLLM's loader lets SR176 through (so the first EngineArgs fails);
    vLLM then never runs its plugins again in the process, and the adapter, installed with the
    error, refuses every later speculative config with the same code."""
    out = runs("enforced")
    assert out["load_error"]["error"] == "ConfigError" and "SR176" in out["load_error"]["message"]
    for result in out["results"]:
        assert result["error"] == "ConfigError" and "SR176" in result["message"], result


def test_custom_class_proposer_runs_the_ngram_plugins_drafter_as_vllms_ngram(runs):
    drafts = runs(None)["results"][3]["drafts"]  # the proposer is vLLM's to load, in any mode
    assert runs("enforce")["results"][3]["drafts"] == drafts
    # request 0: the built-in ngram's vLLM rule (the last 5 tokens occurred before, followed by
    # 8 9 1); request 1 is not decoding; request 2 has no earlier match, so (as vLLM's ngram)
    # nothing is proposed; request 3 is at the model's maximum length; request 4 has room for 2
    assert drafts == [[8, 9, 1], [], [], [], [1, 2]]


def test_custom_class_refuses_a_drafter_it_cannot_drive_when_vllm_builds_it(runs):
    """DFlash drafts from the target's hidden states; vLLM's custom_class seam passes token ids
    only, so the proposer refuses at construction (vLLM wraps it), naming the seam."""
    result = runs(None)["results"][4]
    assert "drafts" not in result
    message = result["propose_error"]["message"]
    assert "Failed to instantiate custom proposer" in message  # vLLM's own wrapper
    assert "SR175" in message and "custom_class seam" in message and "hidden states" in message


def test_custom_class_proposer_runs_the_suffix_plugins_drafter(runs):
    """The built-in suffix drafter under vLLM's custom_class, constructed by vLLM's own
    create_custom_proposer: request 0's "1 2 3" was followed by "4 5 6" (a 3-token match allows
    max_spec_factor * 3 = 3 drafts of k = 4); request 1 has no match, so nothing is proposed."""
    result = runs(None)["results"][5]
    assert result["method"] == "custom_class" and result["k"] == 4
    assert result["drafts"] == [[4, 5, 6], []]
    assert runs("enforce")["results"][5]["drafts"] == result["drafts"]
