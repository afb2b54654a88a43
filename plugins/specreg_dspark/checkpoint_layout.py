"""A DSpark checkpoint's anchor layout and gamma, and the block sizes SGLang never reads (SR314).

The layout is ``sample_from_anchor`` / ``bonus_anchor`` when the checkpoint says (SR306 when
both do and contradict each other), else the speculators model type; gamma is the speculators'
``speculative_tokens``, else the block size read in SGLang's order (`specreg_dspark.checkpoint`),
less the anchor slot in the bonus-anchor layout. A ``dspark_config`` or ``text_config``
block_size that disagrees is the notice SR314.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Literal

from specreg.errors import Problem, problem
from specreg.integers import is_int
from specreg_dspark.checkpoint_reader import FieldReader, sub_mapping

Layout = Literal["dense", "bonus_anchor"]
LAYOUTS: tuple[str, ...] = ("dense", "bonus_anchor")
#: The key of a block size bundled in the target checkpoint (read first, taken as gamma).
PREFIXED_BLOCK = "dspark_block_size"
#: Sub-dicts whose block_size SGLang 0.5.23 never reads for DSpark's block.
UNREAD_BLOCK_LAYERS = ("dspark_config", "text_config")


def speculative_tokens(mapping: Mapping[str, Any], problems: list[Problem]) -> int | None:
    """``speculators_config.proposal_methods[<default_proposal_method>].speculative_tokens``."""
    spec = sub_mapping(mapping, "speculators_config")
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


def unread_block_sizes(
    mapping: Mapping[str, Any], block_size: int | None, where: str | None
) -> list[Problem]:
    """SR314 (a notice) for each dspark_config / text_config block_size that disagrees with the
    block read in SGLang's order; the block itself never changes."""
    found = []
    for label in UNREAD_BLOCK_LAYERS:
        value = sub_mapping(mapping, label).get("block_size")
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


def layout_of(
    mapping: Mapping[str, Any], r: FieldReader, keys_for: Any
) -> tuple[Layout, list[Problem]]:
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


def gamma_of(
    layout: Layout,
    block_size: int | None,
    speculative_tokens: int | None,
    r: FieldReader,
    problems: list[Problem],
) -> int | None:
    """Proposed tokens per step: the speculators' speculative_tokens (SR306 when the block
    size contradicts it in `layout`), else from the block size (the bonus-anchor layout keeps
    one slot for the anchor: SR301 below 2)."""
    where = r.sources.get("block_size", "block_size")
    prefixed = where == PREFIXED_BLOCK
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
