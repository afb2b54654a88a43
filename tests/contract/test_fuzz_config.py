"""Fuzz the config entry points: config_from_flags, the CLI, Phase (the DSpark draft
config.json parsers: tests/dspark/test_fuzz_config.py)."""

from __future__ import annotations

import contextlib
import io

import pytest
from hypothesis import given
from hypothesis import strategies as st

from specreg import ConfigError, Phase, UnknownPhaseError, config_from_flags
from specreg.cli.command import main
from tests.support.fuzz import coded_or_result, fuzz_settings, junk, scalars

pytestmark = pytest.mark.fuzz

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
def test_config_from_flags_returns_config_or_coded_error(data):
    config, error = coded_or_result(lambda: config_from_flags(data))
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
def test_config_from_flags_rejects_non_mappings_with_a_code(data):
    config, error = coded_or_result(lambda: config_from_flags(data))
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


# ----------------------------------------------------------------------------------- Phase
@fuzz_settings(300)
@given(st.one_of(junk(), st.sampled_from(["draft-decode", " TARGET VERIFY ", "draft_extend"])))
def test_phase_parse_any_object(value):
    phase, error = coded_or_result(lambda: Phase.parse(value))
    if error is None:
        assert isinstance(phase, Phase)
    else:
        assert isinstance(error, UnknownPhaseError) and error.code == "SR100"
