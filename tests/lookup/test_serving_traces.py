"""ngram and suffix under vLLM's custom_class, driven exactly as vLLM 0.33's GPU model runner
drives a custom_class proposer (token rows and lengths, no request ids; rows reused by new
requests, requests finishing and joining, rows moving down, batches shrinking), agree with the
real systems' drafts on the same serving traces, step by step and row by row:

- suffix with arctic-inference's SuffixDecodingCache driven by vLLM's own suffix proposer
  (which knows the request ids);
- ngram with vLLM's own ngram proposer (its numba kernel).

Their drafts are committed in data/serving_oracles.json.gz, made by
data/generate_serving_oracles.py (versions and checksums inside); each trace is replayed with
the committed drafts steering it, so neither vLLM nor arctic-inference is needed here.
"""

from __future__ import annotations

import gzip
import json
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import numpy as np
import pytest

from specreg import Registry
from specreg.adapters.vllm_proposers import SpecregProposer
from specreg.adapters.vllm_proposers import __getattr__ as proposer_class
from tests.support.serving_traces import SCENARIOS, Trace, TraceConfig, make_trace, replay

DATA = Path(__file__).parent / "data" / "serving_oracles.json.gz"
REGENERATE = "python tests/lookup/data/generate_serving_oracles.py"


@pytest.fixture(scope="module")
def oracles() -> dict[str, Any]:
    return json.loads(gzip.decompress(DATA.read_bytes()))


@pytest.fixture(scope="module")
def registry() -> Registry:
    return Registry.load(allowlist=frozenset({"lookup"}), fresh=True)


def proposer(registry: Registry, algorithm: str, config: TraceConfig) -> SpecregProposer:
    """specreg's custom_class proposer as vLLM builds it, with the trace's options."""
    vllm_config = SimpleNamespace(
        speculative_config=SimpleNamespace(num_speculative_tokens=config.k),
        model_config=SimpleNamespace(max_model_len=config.max_model_len))
    options = {
        "suffix": {"max_tree_depth": config.max_tree_depth,
                   "max_cached_requests": config.max_cached_requests,
                   "max_spec_factor": config.max_spec_factor,
                   "min_token_prob": config.min_token_prob},
        "ngram": {"min_ngram": config.min_ngram, "max_ngram": config.max_ngram},
    }[algorithm]
    return proposer_class(algorithm)(vllm_config, registry=registry, draft_config=options)


Difference = tuple[int, int, list[int], list[int]]  # (step, row, specreg's draft, the oracle's)


def disagreements(registry: Registry, algorithm: str, trace: Trace,
                  expected: dict[str, Any]) -> list[Difference]:
    """Every row of every step where specreg's proposer drafts otherwise than the oracle did;
    the oracle's drafts steer the trace (the rows' tokens never depend on specreg's)."""
    ours = proposer(registry, algorithm, trace.config)
    steps = expected["drafts"]
    wrong: list[Difference] = []
    step = 0

    def propose(batch: Any, sampled: list[list[int]]) -> list[list[int]]:
        nonlocal step
        want = steps[step]
        got = ours.propose(sampled, batch.num_tokens_no_spec, batch.token_ids_cpu,
                           slot_mappings=None)
        wrong.extend((step, row, a, b) for row, (a, b) in enumerate(zip(got, want, strict=True))
                     if a != b)
        step += 1
        return want

    replay(trace, propose)
    assert step == expected["steps"] == len(steps), (
        f"the trace no longer matches the committed oracle data: run {REGENERATE}")
    return wrong


def rounded_ties(expected: dict[str, Any], found: list[Difference]) -> list[Difference]:
    """The differences where arctic's float32 scores break an exact tie between the request's
    own tree and the global one (recorded by the generator as near ties): specreg keeps
    arctic's rule there (a tie goes to the request's own tree); any other difference fails."""
    ties = {(step, row): (local, other) for step, row, local, other, *_ in
            expected.get("near_ties", [])}
    for step, row, got, want in found:
        assert (step, row) in ties, (step, row, got, want)
        local, other = ties[step, row]
        assert (got, want) in ((local, other), (other, local)), (step, row, got, want)
    return found


def test_the_data_records_what_produced_it(oracles):
    assert oracles["generated_by"] == "tests/lookup/data/generate_serving_oracles.py"
    assert oracles["vllm"] == "0.33.0"
    assert oracles["ngram_kernel"].startswith("numba ")  # vLLM's kernel as vLLM runs it
    arctic = oracles["arctic_inference"]
    assert arctic["arctic_inference"] == "0.3.0"
    assert arctic["upstream_commit"].startswith("8d5d124")
    assert len(oracles["traces"]["suffix"]) == len(oracles["traces"]["ngram"]) == 1000


#: What arctic-inference drafts in each named scenario, at the step the issue is about.
PINNED = {
    # A emitted 7 8 9, B's first sampled token is 7: "7" -> 8 (one token per matched token)
    "first_sampled_token_in_global_tree": (3, [[8]]),
    "first_sampled_token_in_global_tree_factor_2": (3, [[8, 9]]),
    # B reuses A's row, same first token: B's own 3 4 2 3 4 2 3 4 proposes 2 3 4
    "reused_row_same_first_token": (2, [[2, 3, 4]]),
    # matches of length 3, 4 and 5 tie at score 2: the longest (5) drafts four tokens
    "score_ties_go_to_the_longer_match": (0, [[0, 1, 0, 1]]),
}


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_suffix_scenarios_draft_what_arctic_inference_drafts(registry, oracles, name):
    expected = oracles["scenarios"][name]["suffix"]
    if name in PINNED:
        step, drafts = PINNED[name]
        assert expected["drafts"][step] == drafts
    assert disagreements(registry, "suffix", SCENARIOS[name], expected) == []


@pytest.mark.parametrize("name", sorted(SCENARIOS))
def test_ngram_scenarios_draft_what_vllms_ngram_proposer_drafts(registry, oracles, name):
    expected = oracles["scenarios"][name]["ngram"]
    assert disagreements(registry, "ngram", SCENARIOS[name], expected) == []


def test_a_thousand_seeded_serving_traces_agree_with_arctic_inference(registry, oracles):
    """Every draft of every step of 1,000 traces (rows reused, requests joining and leaving,
    rows moving down, batches shrinking, requests at the model's length) equals the one
    arctic-inference's cache gave vLLM's suffix proposer, but for three exact ties."""
    rounded = {}
    reused = 0
    for seed, expected in enumerate(oracles["traces"]["suffix"]):
        trace = make_trace(seed)
        found = rounded_ties(expected, disagreements(registry, "suffix", trace, expected))
        rounded.update({(seed, step, row): (got, want) for step, row, got, want in found})
        reused += len(trace.requests) > trace.config.max_num_reqs
    assert reused > 500  # most traces run more requests than the batch has rows
    # specreg's draft, arctic's, where arctic's float32 scores of two exactly equal drafts
    # differ (2/5 = 6/15, 4/5 = 4/5, 3/3 = 5/5): arctic took the global tree's, specreg the
    # request's own, as arctic's rule gives a tie
    assert rounded == {
        (423, 19, 1): ([20, 5], [12, 15]),
        (605, 10, 0): ([9, 16], [11, 2]),
        (994, 10, 1): ([3, 6, 2], [6, 5, 6]),
    }


def test_the_first_traces_step_by_step_agree_with_vllms_ngram_proposer(registry, oracles):
    for seed, expected in enumerate(oracles["traces"]["ngram"][:STEP_BY_STEP]):
        assert disagreements(registry, "ngram", make_trace(seed), expected) == [], seed


#: Traces the ngram test drives call by call; ngram keeps no state between calls, so the rows
#: of all 1,000 are also proposed in one call per configuration (next test), which is fast.
STEP_BY_STEP = 12


def test_a_thousand_seeded_serving_traces_agree_with_vllms_ngram_proposer(registry, oracles):
    """Every row of every step of the 1,000 traces, exactly as the runner handed it over
    (the row's tokens, its length, whether it sampled), proposed in one batch per drafter
    configuration: the drafts equal vLLM's ngram proposer's at that step."""
    groups: dict[tuple[int, ...], list[tuple[list[int], np.ndarray, int, list[int]]]] = {}
    configs: dict[tuple[int, ...], TraceConfig] = {}
    for seed, expected in enumerate(oracles["traces"]["ngram"]):
        trace = make_trace(seed)
        config = trace.config
        key = (config.k, config.min_ngram, config.max_ngram, config.max_model_len)
        configs.setdefault(key, config)
        steps = iter(expected["drafts"])

        def collect(batch: Any, sampled: list[list[int]], key: tuple[int, ...] = key,
                    steps: Any = steps) -> list[list[int]]:
            want = next(steps)
            rows = groups.setdefault(key, [])
            rows.extend((s, batch.token_ids_cpu[i].copy(), int(batch.num_tokens_no_spec[i]), w)
                        for i, (s, w) in enumerate(zip(sampled, want, strict=True)))
            return want

        replay(trace, collect)
    total = 0
    for key, rows in groups.items():
        sampled = [s for s, _, _, _ in rows]
        tokens = np.stack([t for _, t, _, _ in rows])
        lengths = np.array([n for _, _, n, _ in rows], dtype=np.int32)
        drafts = proposer(registry, "ngram", configs[key]).propose(sampled, lengths, tokens)
        assert drafts == [w for _, _, _, w in rows], key
        total += len(rows)
    assert total > 35_000 and len(groups) > 50


def test_an_empty_context_gets_no_drafts_as_in_vllms_ngram_proposer(registry, oracles):
    """A row with no tokens (num_tokens_no_spec = 0), one at the model's length and one short
    of it: vLLM's ngram proposer drafts nothing, nothing and one token; so does specreg's
    (no SR903 failing the batch)."""
    (call,) = oracles["ngram_calls"]
    config = TraceConfig(**call["config"])
    tokens = np.full((len(call["rows"]), config.max_model_len), 3, dtype=np.int32)
    for i, row in enumerate(call["rows"]):
        tokens[i, : len(row)] = row
    lengths = np.array([len(r) for r in call["rows"]], dtype=np.int32)
    for algorithm in ("ngram", "suffix"):
        drafts = proposer(registry, algorithm, config).propose(call["sampled"], lengths, tokens)
        assert drafts[0] == [] and drafts[1] == []
    assert proposer(registry, "ngram", config).propose(call["sampled"], lengths, tokens) \
        == call["drafts"] == [[], [], [2], [2, 1]]
