"""Reading a Medusa heads checkpoint's config.json: `MedusaHeadsConfig` (heads, layers, vocab).

Torch-free: imported by the plugin at entry-point load. Parsing never raises: it returns the
config and every problem. Both spellings are read: Medusa's own (`medusa_num_heads`,
`medusa_num_layers`) and vLLM's `MedusaConfig` (`num_heads`, `num_hidden_layers`); the Medusa
spelling wins where both are present. `vocab_size` is optional (heads predict over the
target's vocabulary); `hidden_size` is read when present.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from specreg.errors import Problem, problem
from specreg.integers import is_int

HEAD_KEYS = ("medusa_num_heads", "num_heads")
LAYER_KEYS = ("medusa_num_layers", "num_hidden_layers")


@attrs.frozen(kw_only=True)
class MedusaHeadsConfig:
    """What the heads checkpoint declares (None: not stated)."""

    num_heads: int | None = None
    num_layers: int | None = None
    hidden_size: int | None = None
    vocab_size: int | None = None


def _first(data: Mapping[str, Any], keys: tuple[str, ...]) -> tuple[Any, str]:
    for key in keys:
        if data.get(key) is not None:
            return data[key], key
    return None, keys[0]


def parse_heads_config(
    data: Mapping[str, Any] | None, *, draft_flag: str
) -> tuple[MedusaHeadsConfig, list[Problem]]:
    """The heads' config and its problems (SR480 for the head or layer count)."""
    if data is None:
        return MedusaHeadsConfig(), []
    problems: list[Problem] = []
    heads, head_key = _first(data, HEAD_KEYS)
    if heads is not None and (not is_int(heads) or heads < 1):
        problems.append(problem(
            "SR480",
            f"medusa: the heads checkpoint declares {head_key}={heads!r}; Medusa needs at "
            "least one head",
            accepted=f"{head_key} an integer >= 1",
            fix=f"point {draft_flag} at the Medusa heads' checkpoint, or fix {head_key} in its "
            "config.json",
            field=f"draft_config.{head_key}",
        ))
        heads = None
    layers, layer_key = _first(data, LAYER_KEYS)
    if layers is not None and (not is_int(layers) or layers < 0):
        problems.append(problem(
            "SR480",
            f"medusa: the heads checkpoint declares {layer_key}={layers!r}",
            accepted=f"{layer_key} an integer >= 0 (residual blocks per head)",
            fix=f"fix {layer_key} in the heads' config.json",
            field=f"draft_config.{layer_key}",
        ))
        layers = None
    hidden = data.get("hidden_size")
    return MedusaHeadsConfig(
        num_heads=heads, num_layers=layers,
        hidden_size=hidden if is_int(hidden) else None,
        vocab_size=data.get("vocab_size") if is_int(data.get("vocab_size")) else None,
    ), problems
