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
)
#: Spellings specreg invented, kept as aliases with a notice naming the real flag.
ALIASES: tuple[Flag, ...] = (
    Flag("speculative_draft_config", "draft_config", real="--speculative-draft-model-path FOLDER"),
    Flag("kv_cache", "cache", real="--enable-hisparse"),
)
#: Every spelling of the command line: SGLang's, then specreg's aliases.
COMMAND_LINE: tuple[Flag, ...] = SGLANG + ALIASES
SGLANG_FIELDS: tuple[str, ...] = tuple(f.key for f in SGLANG)
#: vLLM speculative-config keys specreg reads.
VLLM_FIELDS: tuple[str, ...] = ("method", "num_speculative_tokens", "model")
BY_KEY: Mapping[str, Flag] = {f.key: f for f in COMMAND_LINE}


def key_of(raw: object) -> str:
    """`--speculative-num-steps`, `speculative-num-steps` and `speculative_num_steps` alike."""
    return str(raw).lstrip("-").replace("-", "_")


def is_framework_key(raw: object) -> bool:
    key = key_of(raw)
    return key in BY_KEY or key in VLLM_FIELDS
