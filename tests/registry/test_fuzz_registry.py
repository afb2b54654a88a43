"""Fuzz `registry.resolve` / `registry.check` with random configs for every built-in algorithm,
alone and with the hisparse cache: a plan with positive widths, or a ConfigError; and resolving
a plan's own config gives the same plan (idempotent resolution).

The idempotence target is part of the bounded long-fuzz pass the default run makes (see
tests/support/fuzz.py): 1,200 examples here, 10,000 under `--fuzz-long`."""

from __future__ import annotations

import pytest
from hypothesis import example, given
from hypothesis import strategies as st

from specreg import ConfigError, Phase, Registry, config_from_flags
from tests.support.fuzz import coded_or_result, fuzz_settings, scalars, structured_drafts

pytestmark = pytest.mark.fuzz

ALGORITHMS = ["eagle", "eagle3", "nextn", "dspark", "dflash", "EAGLE", "medusa", "ngram"]
HISPARSE_KEYS = [
    "top_k", "hot_size", "page_size", "tokens_per_step", "max_steps", "scratch_rows",
    "req_slots", "row_bytes", "max_seq_len", "host_rows", "device_rows", "layers", "policy",
    "device", "bogus",
]  # fmt: skip
# Pool sizes stay small enough that a plan's swapper state fits in memory (see the report: the
# layout has no upper bound on req_slots x max_seq_len).
option_values = st.one_of(
    st.integers(-2, 64),
    st.sampled_from(["8", " 16 ", "x", "lru", "clock", "cpu", "0", None, True, 2.5, [4]]),
)
small_ints = st.one_of(st.none(), st.integers(-2, 12), st.sampled_from([2**31, 2**40]))


@st.composite
def configs(draw):
    data = {"algorithm": draw(st.sampled_from(ALGORITHMS))}
    with_cache = draw(st.booleans())
    # Huge widths only without the cache: hisparse sizes its pools from the verify width with no
    # upper bound (reported), so a 2**31-token step would try to allocate terabytes.
    widths = st.integers(-2, 12) if with_cache else st.one_of(small_ints, scalars)
    for key in ("num_steps", "topk", "num_draft_tokens"):
        value = draw(st.one_of(st.none(), widths))
        if value is not None:
            data[key] = value
    if draw(st.booleans()):
        data["candidate_steps"] = draw(
            st.one_of(st.lists(st.integers(-1, 9), max_size=4), scalars)
        )
    if draw(st.booleans()):
        data["draft_config"] = draw(structured_drafts)
    if with_cache:
        data["cache"] = draw(st.sampled_from(["hisparse", "HiSparse", "paged"]))
        opts = draw(
            st.dictionaries(st.sampled_from(HISPARSE_KEYS[:12]), option_values, max_size=5)
        )
        opts.setdefault("max_seq_len", 256)
        opts.setdefault("req_slots", 4)
        data["cache_options"] = opts
    return data


@pytest.fixture(scope="module")
def registry():
    return Registry.load()


def _check_plan(plan) -> None:
    assert plan.gamma >= 0
    for phase in Phase:
        assert plan.num_tokens_per_req(phase) >= 1
        assert plan.num_tokens_per_req(phase, is_draft_worker=True) >= 1
    assert plan.verifier is not None
    if plan.cache is not None:
        assert plan.cache_swapper is not None
        assert plan.cache_swapper.layout.max_steps >= plan.num_tokens_per_req(Phase.TARGET_VERIFY)
    plan.to_dict()


@fuzz_settings(250)
@given(data=configs())
def test_resolve_gives_plan_or_config_error(registry, data):
    plan, error = coded_or_result(lambda: registry.resolve(data))
    problems = registry.check(data)
    assert all(p.code.startswith("SR") for p in problems)
    if error is not None:
        assert isinstance(error, ConfigError), error
        assert any(p.is_error for p in problems)
        return
    _check_plan(plan)
    assert not any(p.is_error for p in problems)
    assert_idempotent(registry, plan)


def assert_idempotent(registry, plan) -> None:
    """`resolve(plan.config)` is the same plan; the config's own sizes are stated beside the
    maxima that size the buffers."""
    again = registry.resolve(plan.config)
    assert again.config.to_dict() == plan.config.to_dict()
    assert again.resolution == plan.resolution
    first, second = plan.to_dict(), again.to_dict()
    first.pop("notices"), second.pop("notices")
    assert first == second
    main = plan.resolution.main
    assert first.get("config_sizes", {"gamma": plan.gamma, "widths": first["widths"]}) == {
        "gamma": main.gamma, "widths": main.widths_dict()
    }


@st.composite
def adaptive_configs(draw):
    """Valid-looking configs with adaptive candidates, with and without the hisparse cache."""
    algorithm = draw(st.sampled_from(["eagle", "eagle3", "nextn", "dspark", "dflash"]))
    data = {"algorithm": algorithm}
    for key, top in (("num_steps", 7), ("topk", 5), ("num_draft_tokens", 24)):
        if draw(st.booleans()):
            data[key] = draw(st.integers(1, top))
    if draw(st.booleans()):
        data["candidate_steps"] = draw(st.lists(st.integers(0, 8), max_size=4, unique=True))
    if algorithm.startswith("d"):
        block = draw(st.one_of(st.none(), st.integers(1, 10)))
        data["draft_config"] = DRAFT_CONFIG | ({"block_size": block} if block else {})
    if draw(st.booleans()):
        data["cache"] = "hisparse"
        data["cache_options"] = {"max_seq_len": 64, "req_slots": 2}
    return data


DRAFT_CONFIG = {"vocab_size": 16, "markov_rank": 4, "markov_head_type": "vanilla",
                "mask_token_id": 15}


@fuzz_settings(1200)
@given(data=adaptive_configs())
@example(data={"algorithm": "eagle", "topk": 2, "candidate_steps": [4], "cache": "hisparse"})
def test_resolving_a_plans_config_gives_the_same_plan(registry, data):
    plan, error = coded_or_result(lambda: registry.resolve(data))
    if error is None:
        assert_idempotent(registry, plan)


@fuzz_settings(100)
@given(data=configs())
def test_resolve_accepts_spec_config_objects(registry, data):
    config, error = coded_or_result(lambda: config_from_flags(data))
    if error is None:
        plan, error = coded_or_result(lambda: registry.resolve(config))
        if error is None:
            _check_plan(plan)
        else:
            assert isinstance(error, ConfigError), error
