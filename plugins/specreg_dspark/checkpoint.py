"""Reading a DFlash/DSpark draft checkpoint's config.json: `DFlashDraftConfig`, `DSparkDraftConfig`.

Torch-free: imported by the plugin at entry-point load. Parsing never raises
(`parse_*_draft_config` returns the config and every problem); `from_hf_config` raises one
`ConfigError`. What a parsed config implies at run time is `specreg_dspark.sizes`; the layered
field reader is `specreg_dspark.checkpoint_reader`, the anchor layout and gamma
`specreg_dspark.checkpoint_layout`.

Resolution order of every DSpark field except the block size (first hit wins):

1. the prefixed top-level key (``dspark_block_size``, ``dspark_markov_rank``,
   ``dspark_noise_token_id``, ``dspark_target_layer_ids``, ``dspark_markov_head_type``,
   ``dspark_bonus_anchor``): a draft head bundled in the target checkpoint;
2. the ``dspark_config`` sub-dict;
3. the text config (``text_config``);
4. the top-level key;
5. the DFlash base parse (``dflash_config`` sub-dict, then top-level keys).

The block size follows SGLang 0.5.23's `parse_dspark_draft_config`: ``dspark_block_size``, else
the DFlash parse (``dflash_config.block_size``, else a top-level ``block_size``); a
``dspark_config`` or ``text_config`` block_size is never read, and one that disagrees is the
notice SR314.

The target vocab size, used to range-check ``mask_token_id``, is read from a
``target_vocab_size`` key when present, else from ``vocab_size`` (the draft shares the target's
vocabulary), following the same order.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from specreg.errors import ConfigError, Problem, dedupe_problems, problem
from specreg_dspark.checkpoint_layout import (
    LAYOUTS,
    PREFIXED_BLOCK,
    Layout,
    gamma_of,
    layout_of,
    speculative_tokens,
    unread_block_sizes,
)
from specreg_dspark.checkpoint_reader import (
    FieldReader,
    layer_range_problems,
    mapping_problems,
    sub_mapping,
)

__all__ = [
    "DEFAULT_MASK_TOKEN", "LAYOUTS", "MARKOV_HEAD_TYPES", "DFlashDraftConfig", "DSparkDraftConfig",
    "Layout", "parse_dflash_draft_config", "parse_dspark_draft_config",
]

DEFAULT_MASK_TOKEN = "<|MASK|>"
MARKOV_HEAD_TYPES: tuple[str, ...] = ("vanilla", "gated", "rnn")

_PREFIXED: Mapping[str, str] = {
    "block_size": PREFIXED_BLOCK,
    "markov_rank": "dspark_markov_rank",
    "mask_token_id": "dspark_noise_token_id",
    "target_layer_ids": "dspark_target_layer_ids",
    "markov_head_type": "dspark_markov_head_type",
    "bonus_anchor": "dspark_bonus_anchor",
}

#: The block size is read from the prefixed key only in the DSpark layers (then the DFlash base).
_ONLY_PREFIXED_BLOCK: Mapping[str, str | None] = {
    "prefixed": PREFIXED_BLOCK, "dspark_config": None, "text_config": None, "": None,
}


# -------------------------------------------------------------------------------------- DFlash
@attrs.frozen(kw_only=True)
class DFlashDraftConfig:
    """The fields of a DFlash draft checkpoint that sizing and drafting need."""

    num_hidden_layers: int | None = None
    num_target_layers: int | None = None
    block_size: int | None = None
    target_layer_ids: tuple[int, ...] | None = None
    mask_token: str = DEFAULT_MASK_TOKEN
    mask_token_id: int | None = None
    target_vocab_size: int | None = None
    sources: Mapping[str, str] = attrs.field(factory=dict, eq=False, repr=False)

    @classmethod
    def from_hf_config(cls, mapping: Mapping[str, Any]) -> DFlashDraftConfig:
        """Parse a config.json mapping; `ConfigError` listing every problem."""
        config, problems = parse_dflash_draft_config(mapping)
        if problems:
            raise ConfigError(problems)
        return config


def parse_dflash_draft_config(mapping: Any) -> tuple[DFlashDraftConfig, list[Problem]]:
    """Parse without raising: the config (invalid fields left unset) and every problem."""
    problems = mapping_problems(mapping)
    if problems:
        return DFlashDraftConfig(), problems
    sub = sub_mapping(mapping, "dflash_config")
    text = sub_mapping(mapping, "text_config")
    r = FieldReader([("dflash_config", sub), ("", mapping)], problems)
    with_text = FieldReader([("dflash_config", sub), ("text_config", text), ("", mapping)], problems)
    num_hidden_layers = with_text.integer("num_hidden_layers", minimum=1)
    num_target_layers = r.integer("num_target_layers", minimum=1)
    block_size = r.integer("block_size", minimum=1)
    ids = r.layer_ids()
    mask_token = r.text("mask_token")
    mask_token_id = r.integer("mask_token_id", minimum=0)
    vocab = with_text.integer("target_vocab_size", minimum=1)
    if vocab is None:
        vocab = with_text.integer("vocab_size", minimum=1)
    problems += layer_range_problems(ids, num_target_layers, r.sources.get("target_layer_ids"))
    sources = {**with_text.sources, **r.sources}
    config = DFlashDraftConfig(
        num_hidden_layers=num_hidden_layers,
        num_target_layers=num_target_layers,
        block_size=block_size,
        target_layer_ids=ids,
        mask_token=mask_token or DEFAULT_MASK_TOKEN,
        mask_token_id=mask_token_id,
        target_vocab_size=vocab,
        sources=sources,
    )
    return config, problems


# -------------------------------------------------------------------------------------- DSpark
@attrs.frozen(kw_only=True)
class DSparkDraftConfig:
    """A DSpark draft checkpoint: the DFlash backbone plus the Markov head and anchor layout.

    ``gamma`` is the number of proposed tokens per step. ``layout`` is ``"dense"`` (sample from
    the anchor: slot k predicts anchor+k+1, checkpoint block_size = gamma) or ``"bonus_anchor"``
    (speculators 1+N: slot 0 is a conditioning anchor, checkpoint block_size = gamma + 1).
    """

    num_hidden_layers: int | None = None
    num_target_layers: int | None = None
    gamma: int | None = None
    target_layer_ids: tuple[int, ...] | None = None
    mask_token: str = DEFAULT_MASK_TOKEN
    mask_token_id: int | None = None
    markov_rank: int = 0
    markov_head_type: str | None = None
    layout: Layout = "dense"
    block_size: int | None = None
    target_vocab_size: int | None = None
    bundled: bool = False
    sources: Mapping[str, str] = attrs.field(factory=dict, eq=False, repr=False)

    @classmethod
    def from_hf_config(cls, mapping: Mapping[str, Any]) -> DSparkDraftConfig:
        """Parse a config.json mapping; `ConfigError` listing every problem."""
        config, problems = parse_dspark_draft_config(mapping)
        errors = [p for p in problems if p.is_error]
        if errors:
            raise ConfigError(errors)
        return config

    @property
    def sample_from_anchor(self) -> bool:
        return self.layout == "dense"

    def draft_width(self, gamma: int) -> int:
        """Tokens per request in one draft forward: gamma (dense) or gamma + 1 (bonus-anchor)."""
        return gamma if self.layout == "dense" else gamma + 1


def parse_dspark_draft_config(mapping: Any) -> tuple[DSparkDraftConfig, list[Problem]]:
    """Parse without raising: the config (invalid fields left at defaults) and every problem."""
    base, problems = parse_dflash_draft_config(mapping)
    if not isinstance(mapping, Mapping):
        return DSparkDraftConfig(), problems
    layers = [
        ("prefixed", mapping),
        ("dspark_config", sub_mapping(mapping, "dspark_config")),
        ("text_config", sub_mapping(mapping, "text_config")),
        ("", mapping),
    ]
    r = FieldReader(layers, problems)
    bundled = any(mapping.get(key) is not None for key in _PREFIXED.values())

    def keys_for(field: str) -> dict[str, str | None]:
        return {"prefixed": _PREFIXED.get(field)}

    def pick(value: Any, field: str, fallback: Any) -> Any:
        if value is None and fallback is not None and field in base.sources:
            r.sources[field] = base.sources[field]
        return fallback if value is None else value

    num_hidden_layers = pick(
        r.integer("num_hidden_layers", minimum=1, keys=keys_for("num_hidden_layers")),
        "num_hidden_layers",
        base.num_hidden_layers,
    )
    num_target_layers = pick(
        r.integer("num_target_layers", minimum=1, keys=keys_for("num_target_layers")),
        "num_target_layers",
        base.num_target_layers,
    )
    # SGLang's order for the block: dspark_block_size, else the DFlash parse (dflash_config,
    # then top level); a dspark_config / text_config block_size is never read, only compared.
    block_size = pick(
        r.integer("block_size", minimum=1, keys=_ONLY_PREFIXED_BLOCK), "block_size", base.block_size
    )
    problems += unread_block_sizes(mapping, block_size, r.sources.get("block_size"))
    ids = pick(r.layer_ids(keys=keys_for("target_layer_ids")), "target_layer_ids", base.target_layer_ids)
    mask_token = pick(r.text("mask_token", keys=keys_for("mask_token")), "mask_token", base.mask_token)
    mask_token_id = pick(
        r.integer("mask_token_id", minimum=0, keys=keys_for("mask_token_id")),
        "mask_token_id",
        base.mask_token_id,
    )
    markov_rank = r.integer("markov_rank", minimum=0, keys=keys_for("markov_rank"))
    head_type = r.text("markov_head_type", keys=keys_for("markov_head_type"))
    if head_type is not None:
        head_type = head_type.strip().lower()
        if head_type not in MARKOV_HEAD_TYPES:
            problems.append(
                problem(
                    "SR302",
                    f"unsupported DSpark markov_head_type={head_type!r} "
                    f"({r.sources['markov_head_type']})",
                    accepted=", ".join(MARKOV_HEAD_TYPES),
                    fix="set markov_head_type to one of the supported heads",
                    field="markov_head_type",
                )
            )
            head_type = None
    if markov_rank and head_type is None and not bundled and "markov_head_type" not in r.sources:
        problems.append(
            problem(
                "SR302",
                f"DSpark requires markov_head_type when markov_rank > 0 (markov_rank="
                f"{markov_rank}), got none",
                accepted=", ".join(MARKOV_HEAD_TYPES),
                fix="add markov_head_type to the draft config (dspark_config.markov_head_type)",
                field="markov_head_type",
            )
        )
    if markov_rank and head_type is None and bundled:
        head_type = "vanilla"  # bundled (prefixed-key) heads are vanilla
    layout, problems_layout = layout_of(mapping, r, keys_for)
    problems += problems_layout
    vocab = base.target_vocab_size
    for field in ("target_vocab_size", "vocab_size"):
        found = r.integer(field, minimum=1, keys=keys_for(field))
        if found is not None:
            vocab = found
            break
    gamma = gamma_of(layout, block_size, speculative_tokens(mapping, problems), r, problems)
    problems += layer_range_problems(ids, num_target_layers, r.sources.get("target_layer_ids"))
    config = DSparkDraftConfig(
        num_hidden_layers=num_hidden_layers,
        num_target_layers=num_target_layers,
        gamma=gamma,
        target_layer_ids=ids,
        mask_token=mask_token or DEFAULT_MASK_TOKEN,
        mask_token_id=mask_token_id,
        markov_rank=markov_rank or 0,
        markov_head_type=head_type,
        layout=layout,
        block_size=block_size,
        target_vocab_size=vocab,
        bundled=bundled,
        sources=dict(r.sources),
    )
    return config, dedupe_problems(problems)
