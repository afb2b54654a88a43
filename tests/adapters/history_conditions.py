"""The parity conditions of the history drafters' cases (SGLang's NGRAM flags, vLLM's ngram and
suffix keys), read from a case's facts for `tests.adapters.deviations.CONDITIONS`."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

NGRAM_NUMBER_FACTS = ("ngram_breadth", "ngram_depth")


def ngram_flags(case: Mapping[str, Any]) -> str:
    """SGLang's --speculative-ngram-* flags: none given, all in range, or a breadth/depth of 0."""
    given = [case[k] for k in (*NGRAM_NUMBER_FACTS, "ngram_match") if case.get(k) is not None]
    if not given:
        return "unset"
    return "zero" if any(case.get(k) == 0 for k in NGRAM_NUMBER_FACTS) else "valid"


def ngram_breadth(case: Mapping[str, Any]) -> str:
    """SGLang NGRAM's breadth (the flag, else 10): one (a chain) or wider; n/a for others."""
    if case.get("algorithm") != "NGRAM":
        return "n/a"
    breadth = case.get("ngram_breadth")
    return "one" if breadth == 1 else "wide"


def ngram_steps(case: Mapping[str, Any]) -> str:
    """SGLang NGRAM's --speculative-num-steps: unset, the tree's drafts (draft tokens - 1), or
    another number (which its worker never reads); n/a for others."""
    if case.get("algorithm") != "NGRAM":
        return "n/a"
    steps = case.get("steps")
    if steps is None:
        return "unset"
    return "drafts" if steps == (case.get("draft") or 12) - 1 else "other"


#: vLLM 0.33.0's ranges for the history drafters' keys (suffix_decoding_max_cached_requests has
#: its own condition, `suffix_cache`).
VLLM_OPTION_RANGES: dict[str, tuple[float, float | None]] = {
    "prompt_lookup_min": (1, None), "prompt_lookup_max": (1, None),
    "suffix_decoding_max_tree_depth": (1, None), "suffix_decoding_max_spec_factor": (0, None),
    "suffix_decoding_min_token_prob": (0, 1),
}


def vllm_options(case: Mapping[str, Any]) -> str:
    """vLLM ngram/suffix keys: none given, all within vLLM's ranges (and min <= max), or not."""
    given = {k: case[k] for k in VLLM_OPTION_RANGES if case.get(k) is not None}
    if not given:
        return "unset"
    for key, value in given.items():
        low, high = VLLM_OPTION_RANGES[key]
        if value < low or (high is not None and value > high):
            return "out-of-range"
    low, high = given.get("prompt_lookup_min"), given.get("prompt_lookup_max")
    return "out-of-range" if None not in (low, high) and low > high else "in-range"


#: vLLM 0.33.0's default suffix_decoding_max_tree_depth.
SUFFIX_DEPTH = 24


def suffix_k(case: Mapping[str, Any]) -> str:
    """For vLLM's suffix: k unset, within or beyond the suffix trees' depth."""
    if case.get("algorithm") != "suffix":
        return "n/a"
    if case.get("k") is None:
        return "unset"
    depth = case.get("suffix_decoding_max_tree_depth", SUFFIX_DEPTH)
    return "beyond" if case["k"] > depth else "within"


def suffix_cache(case: Mapping[str, Any]) -> str:
    """vLLM's suffix_decoding_max_cached_requests: unset, 0 (no global tree), -1, or a limit."""
    value = case.get("suffix_decoding_max_cached_requests")
    if value is None:
        return "unset"
    return "disabled" if value == 0 else "negative" if value < 0 else "limited"
