"""Reads a checkpoint's config.json (a target's `--model-path`, a draft's folder) as a framework does.

A missing or unreadable file is SR160 naming the flag the path came from; specreg never fetches
from a hub.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from typing import Any

from specreg.errors import Problem, problem
from specreg.contract.framework_flags import key_of


def read_model_config(path: Any, flag: str) -> tuple[dict[str, Any] | None, Problem | None]:
    """A checkpoint folder's (or a file's) config.json; SR160 naming the path when it has none."""
    text = os.fspath(path) if isinstance(path, (str, os.PathLike)) else None
    if text is None:
        return None, problem(
            "SR160", f"{flag} must be a path, got {path!r}",
            accepted="a local checkpoint folder holding config.json",
            fix=f"pass {flag} FOLDER", field=key_of(flag),
        )
    file = os.path.join(text, "config.json") if os.path.isdir(text) else text
    try:
        with open(file, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        reason = "no such file" if isinstance(exc, FileNotFoundError) else str(exc)
        return None, problem(
            "SR160", f"{flag} {text!r}: cannot read {file!r} ({reason})",
            accepted="a local checkpoint folder holding a readable config.json",
            fix=f"point {flag} at the checkpoint folder that holds config.json "
            "(download it first; specreg never fetches from a hub)",
            field=key_of(flag),
        )
    if not isinstance(data, dict):
        return None, problem(
            "SR160", f"{flag} {text!r}: {file!r} holds a JSON {type(data).__name__}, not an object",
            accepted="a config.json whose top level is an object",
            fix=f"point {flag} at the checkpoint's config.json", field=key_of(flag),
        )
    return data, None


def architecture(model_config: Mapping[str, Any] | None) -> str | None:
    """The first of a config.json's `architectures`, or None."""
    archs = (model_config or {}).get("architectures") or []
    return str(archs[0]) if isinstance(archs, list) and archs else None


def vocab_size(model_config: Mapping[str, Any] | None) -> Any:
    """A config.json's vocab_size: top level, else its text_config's (multimodal checkpoints)."""
    config = model_config or {}
    text = config.get("text_config")
    nested = text.get("vocab_size") if isinstance(text, Mapping) else None
    return config.get("vocab_size", nested)
