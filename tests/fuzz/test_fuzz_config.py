"""Fuzz the config entry points: SpecConfig.from_dict, the CLI, draft config.json parsing, Phase."""

from __future__ import annotations

import contextlib
import io

import pytest
from fuzz_profile import fuzz_settings
from fuzz_strategies import coded_or_result, junk, scalars
from hypothesis import given
from hypothesis import strategies as st
from specreg_dspark.checkpoint import (
    DFlashDraftConfig,
    DSparkDraftConfig,
    parse_dflash_draft_config,
    parse_dspark_draft_config,
)

from specreg import ConfigError, Phase, SpecConfig, UnknownPhaseError
from specreg.cli import main

CONFIG_KEYS = [
    "algorithm", "num_steps", "topk", "num_draft_tokens", "draft_config", "cache",
    "cache_options", "candidate_steps",
    "--speculative-algorithm", "--speculative-num-steps", "--speculative-eagle-topk",
    "--speculative-num-draft-tokens", "--speculative-draft-config", "--kv-cache",
    "speculative_algorithm", "speculative_num_steps", "speculative_eagle_topk",
    "speculative_num_draft_tokens", "kv_cache", "kv_cache_options", "speculative-num-steps",
]  # fmt: skip

config_values = st.one_of(
    junk(),
    st.lists(st.integers(-2, 9), max_size=5),
    st.dictionaries(st.sampled_from(["top_k", "hot_size", "max_steps", "x"]), scalars, max_size=3),
)
config_dicts = st.dictionaries(
    st.one_of(st.sampled_from(CONFIG_KEYS), st.text(max_size=8), st.integers(-1, 3)),
    config_values,
    max_size=6,
)


@fuzz_settings(300)
@given(config_dicts)
def test_from_dict_returns_config_or_coded_error(data):
    config, error = coded_or_result(lambda: SpecConfig.from_dict(data))
    if error is not None:
        assert isinstance(error, ConfigError)
        return
    assert isinstance(config.algorithm, str) and config.algorithm
    for name in ("num_steps", "topk", "num_draft_tokens"):
        value = getattr(config, name)
        assert value is None or (isinstance(value, int) and not isinstance(value, bool))
    config.to_dict()


@fuzz_settings(100)
@given(junk())
def test_from_dict_rejects_non_mappings_with_a_code(data):
    config, error = coded_or_result(lambda: SpecConfig.from_dict(data))
    assert error is not None or isinstance(data, dict)


# ------------------------------------------------------------------------------------- CLI
FLAGS = [
    "--speculative-algorithm", "--speculative-num-steps", "--speculative-eagle-topk",
    "--speculative-num-draft-tokens", "--kv-cache", "--kv-cache-option",
    "--speculative-candidate-steps",
]  # fmt: skip
flag_values = st.one_of(
    st.sampled_from(["eagle", "eagle3", "dspark", "dflash", "ngram", "hisparse", "bogus", "0",
                     "3", "-2", "9999999999999999999999", "1.5", "true", "a=b", "=1", "top_k=4",
                     "hot_size=-1", "max_steps=x", "1,2,3", "1,,1", ",", " ", "nan"]),
    st.text(alphabet=st.characters(blacklist_categories=("Cs",), blacklist_characters="\x00"),
            max_size=10),
)  # fmt: skip


@fuzz_settings(60)
@given(
    command=st.sampled_from(["check", "plan"]),
    flags=st.lists(st.tuples(st.sampled_from(FLAGS), flag_values), max_size=5),
    as_json=st.booleans(),
)
def test_cli_exits_zero_or_one_without_traceback(command, flags, as_json):
    argv = [command] + [f"{flag}={value}" for flag, value in flags] + (["--json"] if as_json else [])
    out, err = io.StringIO(), io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(err):
        code = main(argv)
    assert code in (0, 1), (argv, code, err.getvalue())
    assert "Traceback" not in out.getvalue() + err.getvalue()


def test_cli_missing_config_file_is_coded():
    out = io.StringIO()
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        code = main(["check", "--config", "/nonexistent/specreg-fuzz.json"])
    assert code == 1 and "SR106" in out.getvalue()


# --------------------------------------------------------------------------- draft config.json
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


@pytest.mark.parametrize(
    "parse, build",
    [
        (parse_dspark_draft_config, DSparkDraftConfig.from_hf_config),
        (parse_dflash_draft_config, DFlashDraftConfig.from_hf_config),
    ],
    ids=["dspark", "dflash"],
)
@fuzz_settings(300)
@given(mapping=st.one_of(draft_configs, junk()))
def test_draft_config_parsing_returns_config_or_coded_problems(parse, build, mapping):
    config, problems = parse(mapping)
    assert all(p.code.startswith("SR") for p in problems)
    built, error = coded_or_result(lambda: build(mapping))
    if error is None:
        for name in ("num_hidden_layers", "num_target_layers", "block_size", "target_vocab_size"):
            value = getattr(built, name)
            assert value is None or (type(value) is int and value >= 1)
        gamma = getattr(built, "gamma", None)
        assert gamma is None or (type(gamma) is int and gamma >= 1)
    else:
        assert isinstance(error, ConfigError)


# ----------------------------------------------------------------------------------- Phase
@fuzz_settings(300)
@given(st.one_of(junk(), st.sampled_from(["draft-decode", " TARGET VERIFY ", "draft_extend"])))
def test_phase_parse_any_object(value):
    phase, error = coded_or_result(lambda: Phase.parse(value))
    if error is None:
        assert isinstance(phase, Phase)
    else:
        assert isinstance(error, UnknownPhaseError) and error.code == "SR100"
