"""`SpecConfig`: what a user asked for, in specreg's field names, type-checked when built.

Range and cross-field rules belong to the algorithm and cache plugins (through
`specreg_validate_config`), so `registry.resolve` can report every problem at once. SGLang's and
vLLM's spellings are translated onto this type by `specreg.registry.translate`.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import Any

import attrs

from specreg.contract.acceptance_rules import AcceptanceRule, rule_of, unknown_keys
from specreg.errors import ConfigError, Problem, problem
from specreg.contract.framework_flags import is_framework_key
from specreg.integers import is_int

_INT_FIELDS = ("num_steps", "topk", "num_draft_tokens")

_ALIASES: Mapping[str, str] = MappingProxyType(
    {
        "kv_cache_options": "cache_options",
    }
)


def _freeze(value: Any) -> Any:
    if isinstance(value, Mapping):
        return MappingProxyType({str(k): _freeze(v) for k, v in value.items()})
    if isinstance(value, list):
        return tuple(_freeze(v) for v in value)
    return value


def _thaw(value: Any) -> Any:
    if isinstance(value, Mapping):
        return {k: _thaw(v) for k, v in value.items()}
    if isinstance(value, tuple):
        return [_thaw(v) for v in value]
    return value


def _optional_mapping(value: Any) -> Mapping[str, Any] | None:
    """A mapping, frozen; a path (str or os.PathLike) is read as the JSON file it names."""
    if isinstance(value, (str, os.PathLike)):
        value = load_json_object(value)
    return None if value is None else _freeze(value)


def _lower_or_none(value: Any) -> Any:
    return value.strip().lower() if isinstance(value, str) else value


def _names_tuple(value: Any) -> Any:
    """Substitution names, sorted and without repeats; a comma-separated string is split."""
    if isinstance(value, str):
        value = [w for w in value.split(",") if w.strip()]
    if isinstance(value, Sequence) and all(isinstance(v, str) for v in value):
        return tuple(sorted({v.strip().lower() for v in value}))
    return value


def _steps_tuple(value: Any) -> Any:
    if value is None or isinstance(value, (str, bytes)):
        return value
    if isinstance(value, Sequence):
        return tuple(value)
    return value


#: The verify modes of sampled chains (`SpecConfig.verify_mode`).
VERIFY_MODES: tuple[str, ...] = ("standard", "invariant")


@attrs.frozen(kw_only=True)
class SpecConfig:
    """A speculative-decoding configuration.

    Unset (None) numeric fields are inferred by the algorithm's plugin. `draft_config` is the
    draft checkpoint's config.json, as a mapping or the path of the file. `cache` names a
    KV-cache backend and `cache_options` holds its options. `candidate_steps` lists the step counts adaptive
    speculation may switch between; widths then cover every candidate. `filter_order` says how
    top-k, top-p and min-p combine in the plan's verifiers ('specreg', 'vllm' or 'sglang'; unset
    = 'specreg'; `specreg.contract.filter_order`): the framework adapters set their own.
    """

    algorithm: str = attrs.field(converter=_lower_or_none)
    num_steps: int | None = None
    topk: int | None = None
    num_draft_tokens: int | None = None
    draft_config: Mapping[str, Any] | None = attrs.field(
        default=None, converter=_optional_mapping, eq=False, hash=False
    )
    cache: str | None = attrs.field(default=None, converter=_lower_or_none)
    cache_options: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_freeze, eq=False, hash=False
    )
    candidate_steps: tuple[int, ...] | None = attrs.field(default=None, converter=_steps_tuple)
    filter_order: str | None = None
    #: How sampled chains are verified: 'standard' (the default: rejection sampling, which
    #: maximises acceptance) or 'invariant' (a draft is accepted iff it equals the target's own
    #: keyed race draw, so the tokens equal plain keyed sampling whatever the drafter).
    verify_mode: str | None = None
    #: The acceptance rule of the plan's verifiers (`specreg.contract.acceptance_rules`): lossless unless
    #: a lossy rule (relaxed thresholds, typical, synthetic) is asked for; a mapping converts.
    acceptance: AcceptanceRule = attrs.field(default=None, converter=rule_of)
    #: The framework seams specreg runs in place of the framework's own (`specreg.contract.substitutions`);
    #: the adapters set what their switch turned on, `specreg check --substitute` the same.
    #: A name no loaded plugin registered is SR181 when a registry checks or resolves it.
    substitutions: tuple[str, ...] = attrs.field(default=(), converter=_names_tuple)
    #: Coded findings of translating framework spellings: notices (aliases, adopted rewrites)
    #: and errors that leave the config standing (SR178), which resolve and check report.
    notices: tuple[Problem, ...] = attrs.field(default=(), eq=False, hash=False, repr=False)
    #: Framework-side facts read with the flags (target architecture, HiSparse switches).
    framework: Mapping[str, Any] = attrs.field(
        factory=dict, converter=_freeze, eq=False, hash=False, repr=False
    )

    def __attrs_post_init__(self) -> None:
        problems = self.type_problems()
        if problems:
            raise ConfigError(problems)

    def _verify_mode_problems(self) -> list[Problem]:
        """SR133: an unknown verify mode, or the invariant mode beside a lossy acceptance rule
        (the invariant rule accepts exactly; a lossy rule would contradict it)."""
        mode = self.verify_mode
        if mode is None:
            return []
        if mode not in VERIFY_MODES:
            return [problem(
                "SR133",
                f"verify_mode={mode!r} is not a verify mode",
                accepted=", ".join(VERIFY_MODES) + " (default standard)",
                fix="leave verify_mode unset for rejection sampling, or pass 'invariant' "
                "(--speculative-verify-mode invariant) for tokens equal to plain sampling",
                field="verify_mode",
            )]
        lossy = isinstance(self.acceptance, AcceptanceRule) and self.acceptance.lossy
        if mode == "invariant" and lossy:
            return [problem(
                "SR133",
                f"verify_mode='invariant' with the lossy {self.acceptance.kind} acceptance rule: "
                "the invariant rule accepts a draft only when it equals the target's own draw",
                accepted="verify_mode='invariant' with lossless acceptance",
                fix="drop the lossy acceptance setting, or the invariant verify mode",
                field="verify_mode",
            )]
        return []

    def type_problems(self) -> list[Problem]:
        out: list[Problem] = []
        if not isinstance(self.algorithm, str) or not self.algorithm:
            out.append(
                problem(
                    "SR104",
                    f"algorithm must be a non-empty string, got {self.algorithm!r}",
                    accepted="a registered algorithm name (see `specreg list`)",
                    fix="set algorithm, e.g. --speculative-algorithm eagle",
                    field="algorithm",
                )
            )
        for name in _INT_FIELDS:
            value = getattr(self, name)
            if value is not None and not is_int(value):
                out.append(
                    problem(
                        "SR104",
                        f"{name} must be an integer, got {value!r} ({type(value).__name__})",
                        accepted="an integer, or unset to infer it",
                        fix=f"pass {name} as an int",
                        field=name,
                    )
                )
        if self.cache is not None and (not isinstance(self.cache, str) or not self.cache):
            out.append(
                problem(
                    "SR104",
                    f"cache must be a backend name, got {self.cache!r}",
                    accepted="a registered cache name, or unset",
                    fix="pass e.g. cache='hisparse' (--enable-hisparse --disable-radix-cache on the "
                    "command line)",
                    field="cache",
                )
            )
        if not isinstance(self.cache_options, Mapping):
            out.append(
                problem(
                    "SR104",
                    f"cache_options must be a mapping of option names to values, got "
                    f"{type(self.cache_options).__name__}",
                    accepted="a dict such as {'hot_size': 4096}",
                    fix="pass cache_options as a dict, or --kv-cache-option KEY=VALUE",
                    field="cache_options",
                )
            )
        elif self.cache_options and self.cache is None:
            out.append(
                problem(
                    "SR108",
                    "cache_options are given but no cache is selected",
                    accepted="cache_options together with cache",
                    fix="set cache (--enable-hisparse --disable-radix-cache for HiSparse) or drop "
                    "the options",
                    field="cache_options",
                )
            )
        if self.candidate_steps is not None:
            steps = self.candidate_steps
            good = (
                isinstance(steps, tuple)
                and len(steps) > 0
                and all(is_int(s) and s >= 0 for s in steps)
                and len(set(steps)) == len(steps)
            )
            if not good:
                out.append(
                    problem(
                        "SR105",
                        f"candidate_steps must be a non-empty list of distinct non-negative "
                        f"integers, got {steps!r}",
                        accepted="e.g. [1, 3, 5]",
                        fix="fix the list, or remove candidate_steps for a static width",
                        field="candidate_steps",
                    )
                )
        if self.filter_order is not None:
            from specreg.contract.filter_order import order_problem

            found = order_problem(
                self.filter_order, field="filter_order",
                fix="leave filter_order unset (specreg's order) or pass 'vllm' or 'sglang' to "
                "filter as that framework's sampler does",
            )
            if found is not None:
                out.append(found)
        out += self._verify_mode_problems()
        if isinstance(self.acceptance, AcceptanceRule):
            out += self.acceptance.problems()
        else:
            out += unknown_keys(self.acceptance)
        if not isinstance(self.substitutions, tuple):  # which names exist: the registry's
            out.append(problem(
                "SR181", f"substitutions must be a list of names, got {self.substitutions!r}",
                accepted="a list of substitution names, e.g. ['hisparse_swap']",
                fix="pass a list of names, or leave substitutions unset", field="substitutions",
            ))
        return out

    # ---------------------------------------------------------------- construction helpers
    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> SpecConfig:
        """Build from a mapping of SpecConfig fields.

        Unknown keys are reported together with every type problem in one `ConfigError`; a
        framework spelling (an SGLang flag, a vLLM key) is named as such, with the function that
        reads it (`specreg.config_from_flags`). `draft_config` may be a mapping or a path to a
        config.json.
        """
        if not isinstance(data, Mapping):
            raise ConfigError(
                problem(
                    "SR104",
                    f"a config must be a mapping, got {type(data).__name__}",
                    accepted="a dict of SpecConfig fields",
                    fix="pass a dict such as {'algorithm': 'eagle'}",
                )
            )
        fields = {f.name for f in attrs.fields(cls)} - {"notices", "framework"}
        kwargs: dict[str, Any] = {}
        problems: list[Problem] = []
        for raw_key, value in data.items():
            key = str(raw_key)
            name = key if key in fields else _ALIASES.get(key.lstrip("-").replace("-", "_"))
            if name is None:
                problems.append(_unknown_key(key, sorted(fields)))
                continue
            kwargs[name] = value
        if isinstance(kwargs.get("draft_config"), (str, os.PathLike)):
            try:
                kwargs["draft_config"] = load_json_object(kwargs["draft_config"])
            except ConfigError as exc:
                problems.extend(exc.problems)
                kwargs.pop("draft_config")
        if "algorithm" not in kwargs:
            problems.append(
                problem(
                    "SR104",
                    "the config has no algorithm",
                    accepted="a registered algorithm name",
                    fix="add 'algorithm' (or --speculative-algorithm)",
                    field="algorithm",
                )
            )
            kwargs["algorithm"] = "<unset>"
        try:
            config = cls(**kwargs)
        except ConfigError as exc:
            problems.extend(exc.problems)
            config = None
        if problems:
            raise ConfigError(problems)
        assert config is not None
        return config

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {}
        for f in attrs.fields(type(self)):
            if f.name in ("notices", "framework"):
                continue
            value = getattr(self, f.name)
            value = value.to_dict() if isinstance(value, AcceptanceRule) else _thaw(value)
            if value is None or value == {}:
                continue
            out[f.name] = value
        return out

    def evolve(self, **changes: Any) -> SpecConfig:
        return attrs.evolve(self, **changes)


def _unknown_key(key: str, fields: list[str]) -> Problem:
    from specreg._suggest import did_you_mean

    if is_framework_key(key):
        return problem(
            "SR104",
            f"config key {key!r} is a framework spelling (an SGLang flag or a vLLM key); "
            "SpecConfig.from_dict reads specreg's field names only",
            accepted=", ".join(fields),
            fix="build the config with specreg.config_from_flags(...) (registry.resolve, "
            "registry.check and the CLI read framework spellings too), or use the field names",
            field=key,
        )
    return problem(
        "SR104",
        f"unknown config key {key!r}.{did_you_mean(key, fields)}",
        accepted=", ".join(fields),
        fix="rename or remove the key",
        field=key,
    )


_FILE_HINTS = {
    "--speculative-draft-config": (
        "draft_config",
        "point --speculative-draft-config (draft_config= in Python) at the draft checkpoint's "
        "config.json",
    ),
    "--config": (
        "config_file",
        "point --config at a JSON file of speculative settings, such as "
        '{"algorithm": "eagle", "num_steps": 3}, or pass the settings as flags',
    ),
}


def load_json_object(
    path: str | os.PathLike[str], *, flag: str = "--speculative-draft-config"
) -> dict[str, Any]:
    """Read a JSON file whose top level is an object; SR106 otherwise, with the fix for `flag`."""
    field, fix = _FILE_HINTS[flag]
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
    except (OSError, ValueError) as exc:
        raise ConfigError(
            problem(
                "SR106",
                f"cannot read {os.fspath(path)!r}: {exc}",
                accepted="a readable JSON file whose top level is an object",
                fix=fix,
                field=field,
            )
        ) from None
    if not isinstance(data, dict):
        raise ConfigError(
            problem(
                "SR106",
                f"{os.fspath(path)!r} holds a JSON {type(data).__name__}, not an object",
                accepted="a JSON object",
                fix=fix,
                field=field,
            )
        )
    return data
