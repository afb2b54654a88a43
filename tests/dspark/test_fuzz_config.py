"""Fuzz the DSpark and DFlash draft config.json parsers: a config or coded problems, never a crash."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from specreg_dspark.checkpoint import (
    DFlashDraftConfig,
    DSparkDraftConfig,
    parse_dflash_draft_config,
    parse_dspark_draft_config,
)

from specreg import ConfigError
from tests.support.fuzz import coded_or_result, draft_configs, fuzz_settings, junk

pytestmark = pytest.mark.fuzz


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
