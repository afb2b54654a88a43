"""Fuzz-target support: the hypothesis settings (CI counts vs the `--fuzz-long` profile), the
shared strategies and the rule every fuzz target checks.

The default run (CI's `python -m pytest -q`) is the bounded long-fuzz pass: each target runs the
derandomized example count its test passes to `fuzz_settings`, which over the resolver
(tests/registry/test_fuzz_registry.py, 1,200 of them resolving each plan's own config again)
and the kernel wrappers (tests/kernels, tests/eagle, tests/dspark `*_fuzz*`) comes to more than
2,000 examples each, in under a minute on CI's two cores. `--fuzz-long` (tests/conftest.py)
loads the `specreg-fuzz-long` profile, which raises every target to at least `LONG_EXAMPLES`
examples (still derandomized, so a failure replays): `pytest -m fuzz --fuzz-long`.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hypothesis import HealthCheck, settings
from hypothesis import strategies as st

from specreg.errors import SpecRegError

LONG_PROFILE = "specreg-fuzz-long"
LONG_EXAMPLES = 10_000
_SUPPRESS = (HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much)


def register_profiles() -> None:
    settings.register_profile(
        LONG_PROFILE,
        max_examples=LONG_EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=_SUPPRESS,
    )


def fuzz_long() -> bool:
    """True when pytest was started with --fuzz-long (the long profile is loaded)."""
    return settings.default.max_examples >= LONG_EXAMPLES


def fuzz_settings(ci_examples: int, long_examples: int = LONG_EXAMPLES) -> settings:
    """Deterministic settings: `ci_examples` in CI, `long_examples` under --fuzz-long."""
    return settings(
        max_examples=long_examples if fuzz_long() else ci_examples,
        deadline=None,
        derandomize=True,
        suppress_health_check=_SUPPRESS,
        database=None,
    )


# ---------------------------------------------------------------------- strategies
#: Scalars of every JSON type plus the awkward Python ones a caller may pass by mistake.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.integers(-3, 40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -0.0, 1.5]),
    st.text(max_size=12),
    st.sampled_from(["eagle", "EAGLE3", " Eagle ", "dspark", "dflash", "ngram", "hisparse", "", "-1"]),
    st.binary(max_size=4),
    st.builds(object),
    st.frozensets(st.integers(0, 4), max_size=3),
)


def junk(leaves: st.SearchStrategy = scalars) -> st.SearchStrategy:
    """Nested lists, tuples and dicts of `leaves`."""
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.tuples(inner, inner),
            st.dictionaries(st.one_of(st.text(max_size=6), st.integers(-2, 2)), inner, max_size=4),
        ),
        max_leaves=12,
    )


def coded_or_result(call: Callable[[], Any]) -> tuple[Any, SpecRegError | None]:
    """Run `call`: a result, or a coded SpecRegError. Any other exception propagates (a bug)."""
    try:
        return call(), None
    except SpecRegError as exc:
        assert exc.problems and all(p.code.startswith("SR") for p in exc.problems), exc
        return None, exc


# ------------------------------------------------- draft config.json (DSpark and DFlash parsers)
DRAFT_KEYS = [
    "num_hidden_layers", "num_target_layers", "block_size", "target_layer_ids", "mask_token",
    "mask_token_id", "target_vocab_size", "vocab_size", "markov_rank", "markov_head_type",
    "sample_from_anchor", "bonus_anchor", "speculators_model_type", "dspark_block_size",
    "dspark_markov_rank", "dspark_noise_token_id", "dspark_target_layer_ids",
    "dspark_markov_head_type", "dspark_bonus_anchor", "default_proposal_method",
    "proposal_methods", "speculative_tokens", "proposal_type",
]  # fmt: skip
SUB_KEYS = ["dflash_config", "dspark_config", "text_config", "speculators_config"]
draft_leaves = st.one_of(
    scalars,
    st.sampled_from(["vanilla", "gated", "rnn", "dspark", "<|MASK|>", "greedy"]),
    st.lists(st.integers(-2, 40), max_size=4),
)


def _draft_mapping(inner):
    keys = st.one_of(st.sampled_from(DRAFT_KEYS + SUB_KEYS), st.text(max_size=5))
    return st.dictionaries(keys, st.one_of(inner, st.lists(inner, max_size=3)), max_size=8)


def _optional_keys(leaves):
    return st.fixed_dictionaries({}, optional={key: leaves for key in DRAFT_KEYS})


_methods = st.one_of(
    st.dictionaries(
        st.sampled_from(["greedy", "dspark", ""]), junk(draft_leaves), min_size=1, max_size=3
    ),
    st.lists(st.one_of(_optional_keys(draft_leaves), junk(draft_leaves)), max_size=3),
    junk(draft_leaves),
)
#: Config.json shapes the parsers read: every key optional, at the top level and in each section.
structured_drafts = st.fixed_dictionaries(
    {},
    optional={
        **{key: draft_leaves for key in DRAFT_KEYS},
        **{sub: st.one_of(_optional_keys(draft_leaves), junk()) for sub in SUB_KEYS[:3]},
        "speculators_config": st.fixed_dictionaries(
            {"proposal_methods": _methods}, optional={"default_proposal_method": junk(draft_leaves)}
        ),
    },
)
draft_configs = st.one_of(
    structured_drafts,
    st.recursive(draft_leaves, _draft_mapping, max_leaves=30).filter(lambda v: isinstance(v, dict)),
)
