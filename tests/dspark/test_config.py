"""Draft config parsing: every resolution path and every error, from config.json files."""

import pytest
from specreg_dspark.checkpoint import (
    DFlashDraftConfig,
    DSparkDraftConfig,
    parse_dspark_draft_config,
)
from specreg_dspark.sizes import gamma_from_num_draft_tokens, resolve_runtime_config

from specreg import ConfigError
from tests.support.dspark import DATA, load


def test_prefixed_keys_win_and_mark_a_bundled_vanilla_head():
    cfg = DSparkDraftConfig.from_hf_config(load("prefixed_bundled"))
    assert cfg.gamma == 5  # dspark_block_size is gamma, over dspark_config / top-level
    assert cfg.markov_rank == 64 and cfg.mask_token_id == 99
    assert cfg.target_layer_ids == (1, 7)
    assert cfg.bundled and cfg.markov_head_type == "vanilla"
    assert cfg.layout == "dense" and cfg.sample_from_anchor
    assert cfg.sources["gamma"] == "dspark_block_size"
    assert cfg.sources["mask_token_id"] == "dspark_noise_token_id"


def test_dspark_config_subdict_beats_text_config_and_top_level():
    cfg = DSparkDraftConfig.from_hf_config(load("dspark_config_subdict"))
    # the block is SGLang's: dspark_config.block_size 7 is not read, the top-level 3 is
    assert (cfg.markov_rank, cfg.mask_token_id, cfg.gamma) == (32, 7, 3)
    assert cfg.markov_head_type == "gated"  # lower-cased
    assert cfg.sources["markov_rank"] == "dspark_config.markov_rank"
    assert not cfg.bundled


def test_text_config_beats_top_level():
    cfg = DSparkDraftConfig.from_hf_config(load("text_config"))
    assert (cfg.markov_rank, cfg.markov_head_type, cfg.mask_token_id) == (16, "rnn", 5)
    assert cfg.target_vocab_size == 50 and cfg.num_hidden_layers == 2
    assert cfg.gamma == 4  # block_size only at the top level


def test_top_level_keys():
    cfg = DSparkDraftConfig.from_hf_config(load("top_level"))
    assert (cfg.gamma, cfg.markov_rank, cfg.mask_token_id, cfg.mask_token) == (6, 8, 3, "<|NOISE|>")
    assert cfg.target_layer_ids == (1, 3) and cfg.num_target_layers == 4


def test_dflash_base_supplies_what_dspark_keys_do_not():
    mapping = load("dflash_base")
    base = DFlashDraftConfig.from_hf_config(mapping)
    assert base.block_size == 16  # dflash_config before top-level block_size 4
    cfg = DSparkDraftConfig.from_hf_config(mapping)
    # the block comes from the DFlash parse, as in SGLang: dflash_config's 16 over the top-level 4
    assert cfg.gamma == 16 and cfg.sources["gamma"] == "dflash_config.block_size"
    assert cfg.mask_token_id == 11 and cfg.sources["mask_token_id"] == "dflash_config.mask_token_id"
    assert cfg.target_layer_ids == (0, 2) and cfg.mask_token == "<|DFLASH_MASK|>"


def test_bonus_anchor_from_speculators_config():
    cfg = DSparkDraftConfig.from_hf_config(load("bonus_anchor_speculators"))
    assert cfg.layout == "bonus_anchor" and not cfg.sample_from_anchor
    assert cfg.gamma == 7  # the default proposal method's speculative_tokens, block_size 8 = 1+7
    assert cfg.draft_width(cfg.gamma) == 8


def test_bonus_anchor_explicit_key_reads_block_size_as_gamma_plus_one():
    cfg = DSparkDraftConfig.from_hf_config(load("bonus_anchor_explicit"))
    assert cfg.layout == "bonus_anchor" and cfg.gamma == 7


def test_every_invalid_field_is_reported_with_its_value_and_range():
    with pytest.raises(ConfigError) as info:
        DSparkDraftConfig.from_hf_config(load("invalid_fields"))
    text = str(info.value)
    fields = {p.field for p in info.value.problems}
    assert {
        "num_hidden_layers", "block_size", "markov_rank", "markov_head_type", "mask_token_id",
        "target_layer_ids", "mask_token", "sample_from_anchor", "vocab_size",
    } <= fields
    assert "block_size='8'" in text and "an integer >= 1" in text
    assert "markov_rank=-1" in text and "an integer >= 0" in text
    assert "'lstm'" in text and "vanilla, gated, rnn" in text
    assert set(info.value.codes) == {"SR301", "SR302"}


def test_dflash_parse_reports_its_own_fields():
    with pytest.raises(ConfigError) as info:
        DFlashDraftConfig.from_hf_config({"block_size": 0, "dflash_config": {"mask_token_id": "x"}})
    assert info.value.codes == ("SR301", "SR301")
    assert "dflash_config.mask_token_id='x'" in str(info.value)


def test_not_a_mapping():
    with pytest.raises(ConfigError) as info:
        DSparkDraftConfig.from_hf_config([1, 2])
    assert info.value.code == "SR301" and "list" in str(info.value)


@pytest.mark.parametrize(
    ("name", "code", "needle"),
    [
        ("layout_mismatch", "SR306", "block_size=8 does not fit speculative_tokens=7"),
        ("layout_keys_conflict", "SR306", "contradict"),
        ("missing_head_type", "SR302", "requires markov_head_type"),
        ("layer_out_of_range", "SR307", "[4]"),
        ("bonus_anchor_block1", "SR301", "bonus-anchor"),
    ],
)
def test_parse_errors(name, code, needle):
    with pytest.raises(ConfigError) as info:
        DSparkDraftConfig.from_hf_config(load(name))
    assert info.value.code == code and needle in str(info.value)


def test_parse_function_returns_config_and_problems_without_raising():
    cfg, problems = parse_dspark_draft_config(load("missing_head_type"))
    assert cfg.markov_rank == 16 and cfg.markov_head_type is None
    assert [p.code for p in problems] == ["SR302"]


@pytest.mark.parametrize(
    ("name", "code", "needle"),
    [
        ("dflash_only", "SR303", "markov_rank > 0"),
        ("mask_out_of_vocab", "SR304", "mask_token_id=64 (mask_token_id) is outside the target vocab size 64"),
        ("no_mask", "SR304", "requires mask_token_id"),
    ],
)
def test_runtime_errors(name, code, needle):
    with pytest.raises(ConfigError) as info:
        resolve_runtime_config(draft_config=load(name), num_draft_tokens=None)
    assert info.value.code == code and needle in str(info.value)


def test_target_vocab_size_key_is_preferred_over_vocab_size():
    runtime = resolve_runtime_config(draft_config=load("mask_target_vocab"), num_draft_tokens=None)
    assert runtime.mask_token_id == 64 and runtime.gamma == 7


def test_gamma_from_num_draft_tokens():
    assert gamma_from_num_draft_tokens(8) == 7
    assert gamma_from_num_draft_tokens(2) == 1
    for bad in (1, 0, -3):
        with pytest.raises(ConfigError) as info:
            gamma_from_num_draft_tokens(bad)
        problem = info.value.problems[0]
        assert problem.code == "SR300" and f"got {bad}" in problem.message
        assert "--speculative-num-draft-tokens" in problem.fix


def test_data_files_are_all_used():
    used = {
        "prefixed_bundled", "dspark_config_subdict", "text_config", "top_level", "dflash_base",
        "bonus_anchor_speculators", "bonus_anchor_explicit", "invalid_fields", "layout_mismatch",
        "layout_keys_conflict", "missing_head_type", "layer_out_of_range", "dflash_only",
        "mask_out_of_vocab", "mask_target_vocab", "no_mask", "no_block_size", "bonus_anchor_block1",
    }
    assert {p.stem for p in DATA.glob("*.json")} == used


def test_block_size_is_read_in_sglangs_order_and_an_unread_one_is_a_notice():
    """SGLang 0.5.23: dspark_block_size, else dflash_config.block_size, else top-level block_size;
    a dspark_config (or text_config) block_size never changes the block (notice SR314)."""
    head = {"markov_rank": 8, "markov_head_type": "vanilla", "mask_token_id": 1, "vocab_size": 10}
    cases = [
        ({"dspark_block_size": 4, "dflash_config": {"block_size": 6}, "block_size": 8}, 4, set()),
        ({"dflash_config": {"block_size": 6}, "block_size": 8}, 6, set()),
        ({"block_size": 8}, 8, set()),
        ({"block_size": 8, "dspark_config": {"block_size": 5}}, 8, {"SR314"}),
        ({"dflash_config": {"block_size": 6}, "dspark_config": {"block_size": 6}}, 6, set()),
        ({"dspark_config": {"block_size": 5}}, None, {"SR314"}),
        ({"block_size": 8, "text_config": {"block_size": 3}}, 8, {"SR314"}),
    ]
    for extra, gamma, codes in cases:
        cfg, problems = parse_dspark_draft_config({**head, **extra})
        assert cfg.gamma == gamma, extra
        assert {p.code for p in problems} == codes, (extra, problems)
        assert all(not p.is_error for p in problems)
    notice = parse_dspark_draft_config({**head, "block_size": 8, "dspark_config": {"block_size": 5}})[1][0]
    assert "dspark_config.block_size=5" in notice.message and "block_size=8" in notice.message
