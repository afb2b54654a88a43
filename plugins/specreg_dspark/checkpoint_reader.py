"""Reading a draft checkpoint's config.json field by field from layered sources, noting each source.

`FieldReader` walks the layers a checkpoint may state a field in (a prefixed key, a sub-dict,
the text config, the top level), first hit wins, and records each field's source for messages;
a value of the wrong type is SR301 and leaves the field unset. `mapping_problems` and
`layer_range_problems` are the checks every draft config shares (SR301, SR307).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specreg.errors import Problem, problem
from specreg.integers import is_int


def sub_mapping(mapping: Mapping[str, Any], key: str) -> Mapping[str, Any]:
    """`mapping[key]` when it is a mapping (a config sub-dict), else an empty one."""
    value = mapping.get(key)
    return value if isinstance(value, Mapping) else {}


class FieldReader:
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


def mapping_problems(mapping: Any) -> list[Problem]:
    """SR301 unless the draft config is a mapping (a config.json object)."""
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


def layer_range_problems(
    ids: tuple[int, ...] | None, num_target_layers: int | None, where: str | None
) -> list[Problem]:
    """SR307 for target layer ids at or beyond the target's layer count."""
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
