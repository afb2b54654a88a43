"""The one table of framework spellings specreg reads: SGLang's flags, vLLM's keys, its aliases.

An SGLang flag is its ServerArgs field with "--" and "-" for "_" (`--speculative-num-steps` is
`speculative_num_steps`); vLLM spells the speculative config as a dict. The command line, the
translation and the SGLang adapter all read this table.
"""

from __future__ import annotations

from collections.abc import Mapping

import attrs


@attrs.frozen
class Flag:
    """One framework spelling: its key, the SpecConfig field it sets directly (if any), whether
    it is a switch or a whole number, and, for a spelling specreg invented, the real flag."""

    key: str
    field: str | None = None
    switch: bool = False
    integer: bool = False
    real: str | None = None

    @property
    def flag(self) -> str:
        return "--" + self.key.replace("_", "-")


#: SGLang ServerArgs fields specreg reads, in the order `specreg check --help` lists them.
SGLANG: tuple[Flag, ...] = (
    Flag("speculative_algorithm", "algorithm"),
    Flag("speculative_num_steps", "num_steps", integer=True),
    Flag("speculative_eagle_topk", "topk", integer=True),
    Flag("speculative_num_draft_tokens", "num_draft_tokens", integer=True),
    Flag("speculative_draft_model_path"),
    Flag("speculative_dspark_block_size", integer=True),
    Flag("speculative_dflash_block_size", integer=True),
    Flag("model_path"),
    Flag("hisparse_config"),
    Flag("enable_hisparse", switch=True),
    Flag("disable_radix_cache", switch=True),
    Flag("enable_mixed_chunk", switch=True),
    Flag("speculative_adaptive", switch=True),
    Flag("speculative_ngram_max_trie_depth", integer=True),
    Flag("speculative_ngram_max_bfs_breadth", integer=True),
    Flag("speculative_ngram_match_type"),
    Flag("speculative_accept_threshold_single"),
    Flag("speculative_accept_threshold_acc"),
)
#: Spellings specreg invented, kept as aliases with a notice naming the real flag.
ALIASES: tuple[Flag, ...] = (
    Flag("speculative_draft_config", "draft_config", real="--speculative-draft-model-path FOLDER"),
    Flag("kv_cache", "cache", real="--enable-hisparse"),
)
#: specreg's own settings, which neither framework has, spelled as their flags are
#: (`--speculative-verify-mode invariant`; `speculative_verify_mode` in a config dict).
SPECREG: tuple[Flag, ...] = (
    Flag("speculative_verify_mode", "verify_mode"),
)
#: Every spelling of the command line: SGLang's, then specreg's aliases and own settings.
COMMAND_LINE: tuple[Flag, ...] = SGLANG + ALIASES + SPECREG
SGLANG_FIELDS: tuple[str, ...] = tuple(f.key for f in SGLANG)
#: vLLM speculative-config keys specreg reads.
VLLM_FIELDS: tuple[str, ...] = (
    "method", "num_speculative_tokens", "model",
    # the lossy acceptance rules (`specreg.contract.acceptance_rules`)
    "typical_acceptance_sampler_posterior_threshold", "typical_acceptance_sampler_posterior_alpha",
    "synthetic_acceptance_rates", "synthetic_acceptance_length",
)
#: vLLM's and SGLang's options of the model-free drafters (ngram, suffix): the translation passes
#: them through in `draft_config`, where the algorithm's plugin reads and checks them.
DRAFTER_OPTIONS: tuple[str, ...] = (
    "prompt_lookup_min",
    "prompt_lookup_max",
    "suffix_decoding_max_tree_depth",
    "suffix_decoding_max_cached_requests",
    "suffix_decoding_max_spec_factor",
    "suffix_decoding_min_token_prob",
    "speculative_ngram_max_trie_depth",
    "speculative_ngram_max_bfs_breadth",
    "speculative_ngram_match_type",
)
BY_KEY: Mapping[str, Flag] = {f.key: f for f in COMMAND_LINE}


def key_of(raw: object) -> str:
    """`--speculative-num-steps`, `speculative-num-steps` and `speculative_num_steps` alike."""
    return str(raw).lstrip("-").replace("-", "_")


def is_framework_key(raw: object) -> bool:
    key = key_of(raw)
    return key in BY_KEY or key in VLLM_FIELDS or key in DRAFTER_OPTIONS
