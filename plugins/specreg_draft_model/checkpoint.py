"""Reading a standalone draft model's and its target's config.json: the vocabulary sizes to compare.

Torch-free: imported by the plugin at entry-point load. Parsing never raises; it returns the
value and the problems found. The draft checkpoint arrives as `SpecConfig.draft_config` (read
from `--speculative-draft-model-path`, or vLLM's speculative config 'model'); the target's
vocabulary as `SpecConfig.framework["target_vocab_size"]` (read from `--model-path`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specreg.errors import Problem, problem
from specreg.integers import is_int


def vocab_size_of(model_config: Mapping[str, Any]) -> tuple[Any, str]:
    """A checkpoint's vocab_size and the key it came from (top level first, then text_config)."""
    if model_config.get("vocab_size") is not None:
        return model_config["vocab_size"], "vocab_size"
    text = model_config.get("text_config")
    if isinstance(text, Mapping) and text.get("vocab_size") is not None:
        return text["vocab_size"], "text_config.vocab_size"
    return None, "vocab_size"


def draft_vocab_size(
    draft_config: Mapping[str, Any] | None, *, draft_flag: str, algorithm: str,
    code: str = "SR471",
    required: bool = True,
) -> tuple[int | None, list[Problem]]:
    """The draft checkpoint's vocabulary size (None when no checkpoint was given) and `code`
    (SR471) when it has no usable one (or none at all, when `required`)."""
    if draft_config is None:
        return None, []
    value, key = vocab_size_of(draft_config)
    if is_int(value) and value >= 1:
        return int(value), []
    if value is None and not required:
        return None, []
    got = "has none" if value is None else f"holds {value!r}"
    return None, [
        problem(
            code,
            f"{algorithm}: the draft checkpoint's config.json {got} for {key}",
            accepted="a positive integer vocab_size (top level or text_config)",
            fix=f"point {draft_flag} at the draft model's checkpoint folder, or fix its "
            "vocab_size",
            field="draft_config.vocab_size",
        )
    ]


def vocab_problems(
    draft_config: Mapping[str, Any] | None,
    target_vocab: Any,
    *,
    draft_flag: str,
    algorithm: str,
    codes: tuple[str, str] = ("SR470", "SR471"),
    subject: str = "the draft model",
    required: bool = True,
) -> list[Problem]:
    """Every problem with the draft's vocabulary: `codes[1]` (SR471) for a bad draft config,
    `codes[0]` (SR470) when the draft's and the target's vocab_size differ (another plugin
    passes its own codes; `required=False` accepts a checkpoint without vocab_size). Nothing
    to compare is no problem."""
    draft_vocab, problems = draft_vocab_size(
        draft_config, draft_flag=draft_flag, algorithm=algorithm, code=codes[1],
        required=required,
    )
    if draft_vocab is None or not is_int(target_vocab) or draft_vocab == target_vocab:
        return problems
    return [
        *problems,
        problem(
            codes[0],
            f"{algorithm}: {subject}'s vocab_size {draft_vocab} differs from the target's "
            f"{target_vocab} (--model-path config.json)",
            accepted=f"a draft checkpoint with vocab_size {target_vocab}, the target's",
            fix=f"point {draft_flag} at a checkpoint trained for this target (its tokenizer)",
            field="draft_config.vocab_size",
        ),
    ]
