"""Messages name the flag of the framework the user runs (specreg.adapters.words)."""

from __future__ import annotations

import pytest

from specreg.adapters.common import resolve_for_framework
from specreg.adapters.words import in_words
from specreg.errors import SpecRegError, problem
from specreg.registry.registry import Registry
from tests.adapters import parity  # the vLLM parity grid's own cases

SGLANG_ONLY = ("--speculative", "--model-path")


def test_vllms_words_count_speculative_tokens_not_draft_tokens():
    found = problem(
        "SR305", "--speculative-num-draft-tokens 6 means gamma=5",
        accepted="--speculative-num-draft-tokens 8 (= gamma + 1), or unset",
        fix="set --speculative-num-draft-tokens 8; --speculative-num-draft-tokens in [2, 8]; "
        "--speculative-num-draft-tokens >= 2; --speculative-draft-model-path FOLDER",
    )
    vllm = in_words(found, "vllm")
    assert vllm.message == "num_speculative_tokens 5 means gamma=5"
    assert vllm.accepted == "num_speculative_tokens 7 (= gamma), or unset"
    assert vllm.fix == ("set num_speculative_tokens 7; num_speculative_tokens in [1, 7]; "
                        "num_speculative_tokens >= 1; the speculative config's 'model' (a checkpoint folder)")
    assert vllm.code == found.code and vllm.field == found.field
    assert in_words(found, "sglang") is found and in_words(found, None) is found


@pytest.fixture(scope="module")
def vllm_messages(parity_models):
    """Every error and notice specreg gives on the vLLM parity grid, in vLLM's words."""
    registry = Registry.load()
    texts = []
    for case in parity.cases_of("vllm"):
        spec = parity.vllm_spec(case["facts"], parity_models)
        try:
            _, notices = resolve_for_framework(registry, dict(spec), "vllm")
            texts += [(spec, n.render()) for n in notices]
        except SpecRegError as exc:
            texts += [(spec, p.render()) for p in exc.problems]
    return texts


def test_no_message_under_vllm_names_an_sglang_flag(vllm_messages):
    assert len(vllm_messages) >= 10
    for spec, text in vllm_messages:
        assert not any(flag in text for flag in SGLANG_ONLY), (spec, text)
    assert sum("num_speculative_tokens" in text for _, text in vllm_messages) >= 5


def test_the_same_case_under_sglang_keeps_sglangs_flags(model_dirs):
    flags = {"speculative_algorithm": "DSPARK", "speculative_num_draft_tokens": 2,
             "speculative_draft_model_path": str(model_dirs["dspark-draft-prefixed"])}
    with pytest.raises(SpecRegError) as info:
        resolve_for_framework(Registry.load(), flags, "sglang")
    assert "set --speculative-num-draft-tokens 6" in str(info.value)
    with pytest.raises(SpecRegError) as info:
        resolve_for_framework(Registry.load(), {"method": "dspark", "num_speculative_tokens": 1,
                                                "model": flags["speculative_draft_model_path"]}, "vllm")
    assert "set num_speculative_tokens 5" in str(info.value) and "--speculative" not in str(info.value)
