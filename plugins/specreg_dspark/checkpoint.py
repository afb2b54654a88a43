"""Reading a DFlash/DSpark draft checkpoint's config.json: `DFlashDraftConfig`, `DSparkDraftConfig`.

Torch-free: imported by the plugin at entry-point load. Parsing never raises
(`parse_*_draft_config` returns the config and every problem); `from_hf_config` raises one
`ConfigError`. What a parsed config implies at run time is `specreg_dspark.sizes`.

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
from typing import Any, Literal

import attrs

from specreg.errors import ConfigError, Problem, dedupe_problems, problem
from specreg.integers import is_int

DEFAULT_MASK_TOKEN = "<|MASK|>"
MARKOV_HEAD_TYPES: tuple[str, ...] = ("vanilla", "gated", "rnn")
Layout = Literal["dense", "bonus_anchor"]
LAYOUTS: tuple[str, ...] = ("dense", "bonus_anchor")

_PREFIXED: Mapping[str, str] = {
    "block_size": "dspark_block_size",
    "markov_rank": "dspark_markov_rank",
    "mask_token_id": "dspark_noise_token_id",
    "target_layer_ids": "dspark_target_layer_ids",
    "markov_head_type": "dspark_markov_head_type",
    "bonus_anchor": "dspark_bonus_anchor",
}

#: The block size is read from the prefixed key only in the DSpark layers (then the DFlash base).
_ONLY_PREFIXED_BLOCK: Mapping[str, str | None] = {
    "prefixed": "dspark_block_size", "dspark_config": None, "text_config": None, "": None,
}
#: Sub-dicts whose block_size SGLang 0.5.23 never reads for DSpark's block.
_UNREAD_BLOCK_LAYERS = ("dspark_config", "text_config")


def _sub(mapping: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    value = mapping.get(key)
    return value if isinstance(value, Mapping) else {}



class _Reader:
    """Reads fields from layered sources, remembering where each value came from."""

    def __init__(self, layers: list[tuple[str, Mapping[str, Any]]], problems: list[Problem]):
        self.layers = layers
        self.problems = problems
        self.sources: dict[str, str] = {}

    def raw(self, field: str, keys: Mapping[str, str] | None = None) -> tuple[Any, str | None]:
        for label, mapping in self.layers:
            key = (keys or {}).get(label, field)
            if key is None or key not in mapping or mapping[key] is None:
                continue
            where = key if label in ("", "prefixed") else f"{label}.{key}"
            self.sources[field] = where
            return mapping[key], where
        return None, None

    def bad(self, field: str, where: str | None, value: Any, accepted: str, fix: str = "") -> None:
        self.problems.append(
            problem(
                "SR301",
                f"draft config {where or field}={value!r} is invalid",
                accepted=accepted,
                fix=fix or f"correct {where or field} in the draft checkpoint's config.json",
                field=field,
            )
        )

    def integer(self, field: str, *, minimum: int, keys: Mapping[str, str] | None = None) -> int | None:
        value, where = self.raw(field, keys)
        if value is None:
            return None
        if not is_int(value) or value < minimum:
            self.bad(field, where, value, f"an integer >= {minimum}")
            return None
        return int(value)

    def layer_ids(self, keys: Mapping[str, str] | None = None) -> tuple[int, ...] | None:
        value, where = self.raw("target_layer_ids", keys)
        if value is None:
            return None
        if (
            not isinstance(value, (list, tuple))
            or not value
            or not all(is_int(v) and v >= 0 for v in value)
        ):
            self.bad("target_layer_ids", where, value, "a non-empty list of layer ids >= 0")
            return None
        return tuple(int(v) for v in value)

    def text(self, field: str, keys: Mapping[str, str] | None = None) -> str | None:
        value, where = self.raw(field, keys)
        if value is None:
            return None
        if not isinstance(value, str) or not value.strip():
            self.bad(field, where, value, "a non-empty string")
            return None
        return value

    def boolean(self, field: str, keys: Mapping[str, str] | None = None) -> bool | None:
        value, where = self.raw(field, keys)
        if value is None:
            return None
        if not isinstance(value, bool):
            self.bad(field, where, value, "true or false")
            return None
        return value


def _check_mapping(mapping: Any) -> list[Problem]:
    if isinstance(mapping, Mapping):
        return []
    return [
        problem(
            "SR301",
            f"the draft config must be a mapping (config.json object), got {type(mapping).__name__}",
            accepted="a JSON object",
            fix="pass the draft checkpoint's config.json (a path or a dict)",
            field="draft_config",
        )
    ]


def _check_layer_range(
    ids: tuple[int, ...] | None, num_target_layers: int | None, where: str | None
) -> list[Problem]:
    if ids is None or num_target_layers is None:
        return []
    bad = [i for i in ids if i >= num_target_layers]
    if not bad:
        return []
    return [
        problem(
            "SR307",
            f"target_layer_ids ({where}) contains {bad}, outside the {num_target_layers} target "
            "layers",
            accepted=f"layer ids in [0, {num_target_layers})",
            fix="use layer ids below num_target_layers, or correct num_target_layers",
            field="target_layer_ids",
        )
    ]


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
    problems = _check_mapping(mapping)
    if problems:
        return DFlashDraftConfig(), problems
    sub = _sub(mapping, "dflash_config")
    text = _sub(mapping, "text_config")
    r = _Reader([("dflash_config", sub), ("", mapping)], problems)
    with_text = _Reader([("dflash_config", sub), ("text_config", text), ("", mapping)], problems)
    num_hidden_layers = with_text.integer("num_hidden_layers", minimum=1)
    num_target_layers = r.integer("num_target_layers", minimum=1)
    block_size = r.integer("block_size", minimum=1)
    ids = r.layer_ids()
    mask_token = r.text("mask_token")
    mask_token_id = r.integer("mask_token_id", minimum=0)
    vocab = with_text.integer("target_vocab_size", minimum=1)
    if vocab is None:
        vocab = with_text.integer("vocab_size", minimum=1)
    problems += _check_layer_range(ids, num_target_layers, r.sources.get("target_layer_ids"))
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


def _speculative_tokens(mapping: Mapping[str, Any], problems: list[Problem]) -> int | None:
    """``speculators_config.proposal_methods[<default_proposal_method>].speculative_tokens``."""
    spec = _sub(mapping, "speculators_config")
    methods = spec.get("proposal_methods")
    if not methods:
        return None
    wanted = spec.get("default_proposal_method")
    chosen: Any = None
    if isinstance(methods, Mapping):
        known = isinstance(wanted, str) and wanted in methods
        chosen = methods[wanted] if known else next(iter(methods.values()))
    elif isinstance(methods, (list, tuple)):
        named = [m for m in methods if isinstance(m, Mapping) and m.get("proposal_type") == wanted]
        chosen = named[0] if named else methods[0]
    value = chosen.get("speculative_tokens") if isinstance(chosen, Mapping) else None
    if value is None:
        return None
    if not is_int(value) or value < 1:
        problems.append(
            problem(
                "SR301",
                f"draft config speculators_config speculative_tokens={value!r} is invalid",
                accepted="an integer >= 1",
                fix="correct speculators_config.proposal_methods in config.json",
                field="gamma",
            )
        )
        return None
    return int(value)


def parse_dspark_draft_config(mapping: Any) -> tuple[DSparkDraftConfig, list[Problem]]:
    """Parse without raising: the config (invalid fields left at defaults) and every problem."""
    base, problems = parse_dflash_draft_config(mapping)
    if not isinstance(mapping, Mapping):
        return DSparkDraftConfig(), problems
    layers = [
        ("prefixed", mapping),
        ("dspark_config", _sub(mapping, "dspark_config")),
        ("text_config", _sub(mapping, "text_config")),
        ("", mapping),
    ]
    r = _Reader(layers, problems)
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
    problems += _unread_block_sizes(mapping, block_size, r.sources.get("block_size"))
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
    layout, problems_layout = _layout(mapping, r, keys_for)
    problems += problems_layout
    vocab = base.target_vocab_size
    for field in ("target_vocab_size", "vocab_size"):
        found = r.integer(field, minimum=1, keys=keys_for(field))
        if found is not None:
            vocab = found
            break
    gamma = _gamma(layout, block_size, _speculative_tokens(mapping, problems), r, problems)
    problems += _check_layer_range(ids, num_target_layers, r.sources.get("target_layer_ids"))
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



def _unread_block_sizes(mapping: Mapping[str, Any], block_size: int | None, where: str | None) -> list[Problem]:
    """SR314 (a notice) for each dspark_config / text_config block_size that disagrees with the
    block read in SGLang's order; the block itself never changes."""
    found = []
    for label in _UNREAD_BLOCK_LAYERS:
        value = _sub(mapping, label).get("block_size")
        if value is None or value == block_size:
            continue
        used = f"{where}={block_size}" if block_size is not None else "none (so the default applies)"
        found.append(
            problem(
                "SR314",
                f"the draft config's {label}.block_size={value!r} is not read: SGLang takes "
                f"DSpark's block from dspark_block_size, else dflash_config.block_size, else a "
                f"top-level block_size; the block used is {used}",
                accepted="dspark_block_size, dflash_config.block_size or a top-level block_size",
                fix=f"move the block size to dflash_config.block_size (or drop {label}.block_size) "
                "in the draft checkpoint's config.json, or set --speculative-num-draft-tokens",
                field="block_size",
                severity="warning",
            )
        )
    return found


def _layout(mapping: Mapping[str, Any], r: _Reader, keys_for: Any) -> tuple[Layout, list[Problem]]:
    """``sample_from_anchor`` / ``dspark_bonus_anchor`` (explicit) or the speculators model type."""
    sample = r.boolean("sample_from_anchor", keys=keys_for("sample_from_anchor"))
    bonus = r.boolean("bonus_anchor", keys=keys_for("bonus_anchor"))
    if sample is not None and bonus is not None and sample == bonus:
        return "dense", [
            problem(
                "SR306",
                f"the draft config says both sample_from_anchor={sample} "
                f"({r.sources['sample_from_anchor']}) and bonus_anchor={bonus} "
                f"({r.sources['bonus_anchor']}); they contradict each other",
                accepted="sample_from_anchor = not bonus_anchor (or only one of them)",
                fix="keep one of the two keys; silently picking either one misreads every draft "
                "slot",
                field="layout",
            )
        ]
    if sample is not None:
        return ("dense" if sample else "bonus_anchor"), []
    if bonus is not None:
        return ("bonus_anchor" if bonus else "dense"), []
    model_type = mapping.get("speculators_model_type")
    if isinstance(model_type, str) and model_type.strip().lower() == "dspark":
        r.sources["layout"] = "speculators_model_type"
        return "bonus_anchor", []
    return "dense", []


def _gamma(
    layout: Layout,
    block_size: int | None,
    speculative_tokens: int | None,
    r: _Reader,
    problems: list[Problem],
) -> int | None:
    where = r.sources.get("block_size", "block_size")
    prefixed = where == _PREFIXED["block_size"]
    if block_size is None and speculative_tokens is None:
        return None
    expected_block = None
    if speculative_tokens is not None:
        expected_block = speculative_tokens if layout == "dense" else speculative_tokens + 1
        if block_size is not None and not prefixed and block_size != expected_block:
            problems.append(
                problem(
                    "SR306",
                    f"the draft config's {where}={block_size} does not fit speculative_tokens="
                    f"{speculative_tokens} in the {layout} layout (expected block_size="
                    f"{expected_block})",
                    accepted="dense: block_size = gamma; bonus_anchor: block_size = gamma + 1",
                    fix="set sample_from_anchor (true = dense, false = bonus-anchor) to the "
                    "layout the checkpoint was trained with; silently picking either one "
                    "misreads every draft slot",
                    field="layout",
                )
            )
        r.sources["gamma"] = "speculators_config.speculative_tokens"
        return speculative_tokens
    assert block_size is not None
    r.sources["gamma"] = where
    if prefixed or layout == "dense":
        return block_size
    if block_size < 2:
        problems.append(
            problem(
                "SR301",
                f"draft config {where}={block_size} is invalid for the bonus-anchor layout "
                "(block_size = gamma + 1 leaves no draft slot)",
                accepted="block_size >= 2 in the bonus-anchor layout",
                fix="correct block_size, or mark the checkpoint dense (sample_from_anchor: true)",
                field="block_size",
            )
        )
        return None
    return block_size - 1

