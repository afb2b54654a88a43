"""What a resolved ngram or suffix config implies: its options, read and checked, every problem at
once.

Both algorithms draft from the token history alone, so they have no draft checkpoint: their
options ride in the config's `draft_config` mapping (`{"algorithm": "ngram", "draft_config":
{"prompt_lookup_min": 2, "prompt_lookup_max": 4}}`). Each option has specreg's short name and
accepts the frameworks' spellings as aliases: vLLM's `prompt_lookup_min` / `prompt_lookup_max`
and `suffix_decoding_*`, SGLang's `speculative_ngram_*`. Imports neither torch nor triton.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs

from specreg.errors import Problem, problem
from specreg.integers import is_int

PROPOSALS = ("chain", "tree")
MATCH_TYPES = ("bfs", "prob")
#: vLLM's defaults: prompt_lookup_min = prompt_lookup_max = 5 when neither is set.
DEFAULT_NGRAM = 5
#: vLLM 0.33's SpeculativeConfig defaults for `suffix`.
DEFAULT_SUFFIX_DEPTH = 24
DEFAULT_SUFFIX_CACHED = 10000
DEFAULT_SUFFIX_FACTOR = 1.0
DEFAULT_SUFFIX_PROB = 0.1
#: SGLang's default --speculative-ngram-max-bfs-breadth.
DEFAULT_BFS_BREADTH = 10

#: option -> the spellings accepted for it (specreg's name first).
NGRAM_KEYS: Mapping[str, tuple[str, ...]] = {
    "min_ngram": ("min_ngram", "prompt_lookup_min"),
    "max_ngram": ("max_ngram", "prompt_lookup_max", "speculative_ngram_max_trie_depth"),
    "proposals": ("proposals",),
    "match_type": ("match_type", "speculative_ngram_match_type"),
    "max_bfs_breadth": ("max_bfs_breadth", "speculative_ngram_max_bfs_breadth"),
}
SUFFIX_KEYS: Mapping[str, tuple[str, ...]] = {
    "max_tree_depth": ("max_tree_depth", "suffix_decoding_max_tree_depth"),
    "max_cached_requests": ("max_cached_requests", "suffix_decoding_max_cached_requests"),
    "max_spec_factor": ("max_spec_factor", "suffix_decoding_max_spec_factor"),
    "max_spec_offset": ("max_spec_offset",),
    "min_token_prob": ("min_token_prob", "suffix_decoding_min_token_prob"),
    "proposals": ("proposals",),
}
_FLAG = "the speculative config (vLLM) or the server flags (SGLang), or draft_config"


@attrs.frozen(kw_only=True)
class NgramOptions:
    """ngram's options: n-gram sizes [min_ngram, max_ngram], chain or tree proposals, and for
    trees SGLang's match type (bfs: most recent matches first; prob: most frequent) and breadth
    (how many earlier matches of the suffix are merged into the tree)."""

    min_ngram: int = DEFAULT_NGRAM
    max_ngram: int = DEFAULT_NGRAM
    proposals: str = "chain"
    match_type: str = "bfs"
    max_bfs_breadth: int = DEFAULT_BFS_BREADTH


@attrs.frozen(kw_only=True)
class SuffixOptions:
    """Suffix decoding's options, vLLM's and arctic-inference's meanings: the trees' depth, how
    many earlier responses the global tree keeps (0: no global tree, -1: no limit), and the
    per-request draft length rule: at most `max_spec_factor * match_len + max_spec_offset`
    tokens, each with an estimated probability of at least `min_token_prob`."""

    max_tree_depth: int = DEFAULT_SUFFIX_DEPTH
    max_cached_requests: int = DEFAULT_SUFFIX_CACHED
    max_spec_factor: float = DEFAULT_SUFFIX_FACTOR
    max_spec_offset: float = 0.0
    min_token_prob: float = DEFAULT_SUFFIX_PROB
    proposals: str = "chain"


def _read(
    algorithm: str, raw: Mapping[str, Any] | None, keys: Mapping[str, tuple[str, ...]]
) -> tuple[dict[str, Any], list[Problem]]:
    """Each option's value under whichever spelling was used; SR492 for unknown keys and for
    one option given under two spellings."""
    from specreg._suggest import did_you_mean

    values: dict[str, Any] = {}
    problems: list[Problem] = []
    spelling = {alias: name for name, aliases in keys.items() for alias in aliases}
    for key, value in (raw or {}).items():
        name = spelling.get(str(key).lstrip("-").replace("-", "_"))
        if name is None:
            problems.append(
                problem(
                    "SR492",
                    f"{algorithm} has no option {key!r}.{did_you_mean(str(key), sorted(spelling))}",
                    accepted=", ".join(sorted(spelling)),
                    fix=f"rename or remove {key!r} in {_FLAG}",
                    field=f"draft_config.{key}",
                )
            )
        elif name in values:
            problems.append(
                problem(
                    "SR492",
                    f"{algorithm}: option {name!r} is given twice (as {key!r} too)",
                    accepted=f"one of {', '.join(keys[name])}, once",
                    fix=f"keep one spelling of {name} in {_FLAG}",
                    field=f"draft_config.{key}",
                )
            )
        else:
            values[name] = value
            values[f"{name}@key"] = str(key)
    return values, problems


def _label(values: Mapping[str, Any], name: str) -> str:
    """ "spelling@option": the key the user wrote (for the message) and the option (the field)."""
    return f"{values.get(name + '@key', name)}@{name}"


def _integer(algorithm: str, name: str, value: Any, low: int, out: list[Problem]) -> bool:
    name, field = name.split("@") if "@" in name else (name, name)
    if not is_int(value) or value < low:
        what = (
            f"{name}={value} is below {low}"
            if is_int(value)
            else (f"{name} must be an integer, got {value!r}")
        )
        out.append(
            problem(
                "SR490",
                f"{algorithm}: {what}",
                accepted=f"an integer {name} >= {low}",
                fix=f"set {name} to an integer >= {low} in {_FLAG}",
                field=f"draft_config.{field}",
            )
        )
        return False
    return True


def _number(
    algorithm: str, name: str, value: Any, low: float, high: float | None, out: list[Problem]
) -> bool:
    name, field = name.split("@") if "@" in name else (name, name)
    ok = isinstance(value, (int, float)) and not isinstance(value, bool)
    if ok and (value < low or (high is not None and value > high) or value != value):
        ok = False
    if not ok:
        span = f"[{low}, {high}]" if high is not None else f">= {low}"
        out.append(
            problem(
                "SR490",
                f"{algorithm}: {name}={value!r} is not a number in {span}",
                accepted=f"a number {name} in {span}",
                fix=f"set {name} within {span} in {_FLAG}",
                field=f"draft_config.{field}",
            )
        )
    return ok


def _choice(
    algorithm: str, name: str, value: Any, choices: tuple[str, ...], out: list[Problem]
) -> str | None:
    name, field = name.split("@") if "@" in name else (name, name)
    text = str(value).strip().lower() if isinstance(value, str) else None
    if text not in choices:
        out.append(
            problem(
                "SR490",
                f"{algorithm}: {name}={value!r} is not one of {', '.join(choices)}",
                accepted=", ".join(choices),
                fix=f"set {name} to one of {', '.join(choices)} in {_FLAG}",
                field=f"draft_config.{field}",
            )
        )
        return None
    return text


def ngram_options(raw: Mapping[str, Any] | None) -> tuple[NgramOptions, list[Problem]]:
    """The ngram options of `raw` (vLLM's defaulting: one size given sets both) and every
    problem with them; the options fall back to defaults where a value is unusable."""
    values, problems = _read("ngram", raw, NGRAM_KEYS)
    sizes = {}
    for name in ("min_ngram", "max_ngram"):
        if name in values and _integer("ngram", _label(values, name), values[name], 1, problems):
            sizes[name] = values[name]
    low = sizes.get("min_ngram", sizes.get("max_ngram", DEFAULT_NGRAM))
    high = sizes.get("max_ngram", sizes.get("min_ngram", DEFAULT_NGRAM))
    if low > high:
        problems.append(
            problem(
                "SR491",
                f"ngram: min_ngram={low} is larger than max_ngram={high}",
                accepted="1 <= min_ngram <= max_ngram "
                "(vLLM: prompt_lookup_min <= prompt_lookup_max)",
                fix="lower prompt_lookup_min or raise prompt_lookup_max",
                field="draft_config.min_ngram",
            )
        )
        low = high
    kwargs: dict[str, Any] = {"min_ngram": low, "max_ngram": high}
    if "proposals" in values:
        kwargs["proposals"] = (
            _choice("ngram", _label(values, "proposals"), values["proposals"], PROPOSALS, problems)
            or "chain"
        )
    if "match_type" in values:
        kwargs["match_type"] = (
            _choice(
                "ngram", _label(values, "match_type"), values["match_type"], MATCH_TYPES, problems
            )
            or "bfs"
        )
    if "max_bfs_breadth" in values and _integer(
        "ngram", _label(values, "max_bfs_breadth"), values["max_bfs_breadth"], 1, problems
    ):
        kwargs["max_bfs_breadth"] = values["max_bfs_breadth"]
    return NgramOptions(**kwargs), problems


def suffix_options(
    raw: Mapping[str, Any] | None, num_steps: int | None = None
) -> tuple[SuffixOptions, list[Problem]]:
    """The suffix options of `raw` and every problem with them, including a draft length
    (`num_steps`) the trees cannot hold (SR493)."""
    values, problems = _read("suffix", raw, SUFFIX_KEYS)
    kwargs: dict[str, Any] = {}
    if "max_tree_depth" in values and _integer(
        "suffix", _label(values, "max_tree_depth"), values["max_tree_depth"], 1, problems
    ):
        kwargs["max_tree_depth"] = values["max_tree_depth"]
    if "max_cached_requests" in values and _integer(
        "suffix", _label(values, "max_cached_requests"), values["max_cached_requests"], -1, problems
    ):
        kwargs["max_cached_requests"] = values["max_cached_requests"]
    for name, low, high in (
        ("max_spec_factor", 0.0, None),
        ("max_spec_offset", -1e9, None),
        ("min_token_prob", 0.0, 1.0),
    ):
        if name in values and _number(
            "suffix", _label(values, name), values[name], low, high, problems
        ):
            kwargs[name] = float(values[name])
    if "proposals" in values:
        kwargs["proposals"] = (
            _choice("suffix", _label(values, "proposals"), values["proposals"], PROPOSALS, problems)
            or "chain"
        )
    options = SuffixOptions(**kwargs)
    if is_int(num_steps) and num_steps > options.max_tree_depth:
        problems.append(
            problem(
                "SR493",
                f"suffix: {num_steps} draft tokens per step exceed the suffix trees' depth "
                f"max_tree_depth={options.max_tree_depth}",
                accepted=f"num_speculative_tokens <= max_tree_depth ({options.max_tree_depth})",
                fix="lower --speculative-num-steps (vLLM: num_speculative_tokens) or raise "
                "suffix_decoding_max_tree_depth",
                field="num_steps",
            )
        )
    return options, problems
