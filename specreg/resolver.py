"""Config resolution: run the hooks once for a config and build its `SpecPlan`.

The order: resolve the config (fill unset parameters), gamma and every phase's width on both
workers (the maxima over adaptive candidates), then every plugin's validation, all problems
reported together; finally the verifier, drafter and cache swapper. Hooks run plugin by plugin
through `Registry.call_hook`, so an error names the plugin that raised.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from typing import TYPE_CHECKING, Any

from specreg import default_plugin
from specreg.config import SpecConfig
from specreg.errors import (
    ConfigError,
    PluginError,
    Problem,
    SpecRegError,
    UnknownNameError,
    problem,
    split_problems,
)
from specreg.phase import PHASES
from specreg.plan import SpecPlan
from specreg.resolution import Resolution
from specreg.specs import AlgorithmSpec, CacheSpec

if TYPE_CHECKING:
    from specreg.registry import Registry


def check_config(registry: Registry, config: SpecConfig | Mapping[str, Any]) -> list[Problem]:
    """Every problem with `config` (errors and warnings), without raising."""
    try:
        _, _, _, problems = _analyse(registry, config)
    except SpecRegError as exc:
        return list(exc.problems)
    return problems


def resolve_plan(registry: Registry, config: SpecConfig | Mapping[str, Any]) -> SpecPlan:
    """Validate `config`, resolve gamma and widths, build the kernels: a `SpecPlan`.

    Raises one `ConfigError` listing every problem found.
    """
    config, algorithm, cache, problems = _analyse(registry, config)
    errors, warnings = split_problems(problems)
    if errors:
        raise ConfigError(errors)
    skip_alg = registry.shadowed(algorithm.name)
    resolution = _resolve(registry, config, algorithm, skip_alg)
    verifier = registry.call_hook(
        "specreg_make_verifier",
        skip=skip_alg,
        firstresult=True,
        config=resolution.config,
        algorithm=algorithm,
    )
    drafter = registry.call_hook(
        "specreg_make_drafter",
        skip=skip_alg,
        firstresult=True,
        config=resolution.config,
        algorithm=algorithm,
    )
    swapper = None
    if cache is not None:
        swapper = registry.call_hook(
            "specreg_make_cache_swapper",
            skip=registry.shadowed(cache.name),
            firstresult=True,
            config=resolution.config,
            cache=cache,
            resolution=resolution,
        )
    return SpecPlan(
        algorithm=algorithm,
        cache=cache,
        resolution=resolution,
        verifier=verifier,
        drafter=drafter,
        cache_swapper=swapper,
        notices=tuple(warnings),
        plugins=tuple(registry.plugins()),
    )


def _analyse(
    registry: Registry, config: SpecConfig | Mapping[str, Any]
) -> tuple[SpecConfig, AlgorithmSpec, CacheSpec | None, list[Problem]]:
    if not isinstance(config, SpecConfig):
        config = SpecConfig.from_dict(config)
    lookup_problems: list[Problem] = []
    algorithm = cache = None
    try:
        algorithm = registry.get_algorithm(config.algorithm)
    except UnknownNameError as exc:
        lookup_problems += exc.problems
    if config.cache is not None:
        try:
            cache = registry.get_cache(config.cache)
        except UnknownNameError as exc:
            lookup_problems += exc.problems
    if algorithm is None:  # nothing else can be checked without the algorithm
        raise ConfigError(lookup_problems)
    problems: list[Problem] = list(lookup_problems)  # an unknown cache hides nothing else
    skip = registry.shadowed(algorithm.name)
    skip |= registry.shadowed(cache.name) if cache else frozenset()
    resolution: Resolution | None = None
    resolve_problems: list[Problem] = []
    try:
        resolution = _resolve(registry, config, algorithm, skip)
    except SpecRegError as exc:
        resolve_problems += exc.problems
    generic: list[Problem] = []  # the default plugin's rules, superseded per field below
    for plugin, found in registry.call_hook(
        "specreg_validate_config",
        skip=skip,
        firstresult=False,
        config=config,
        algorithm=algorithm,
        cache=cache,
        resolution=resolution,
    ):
        for item in found:
            if not isinstance(item, Problem):
                item = problem(
                    "SR114",
                    f"plugin {plugin!r} returned {type(item).__name__} from "
                    "specreg_validate_config instead of specreg.Problem",
                    fix="return a list of specreg.Problem",
                )
            (generic if plugin == default_plugin.PLUGIN_NAME else problems).append(item)
    # A plugin's own error about a field replaces the generic range message for it.
    owned = {p.field for p in problems if p.is_error and p.field}
    problems += [p for p in generic if not (p.is_error and p.field in owned)]
    problems += consequences_dropped(resolve_problems, problems)
    return config, algorithm, cache, _dedupe(problems)


def consequences_dropped(resolve_problems: list[Problem], found: list[Problem]) -> list[Problem]:
    """The resolve hooks' problems, less SR115 (a hook returned nonsense) when validation
    already found an error in the user's input: the hook only echoed that input, so blaming the
    plugin would point the user at the wrong party. Once the input is fixed, a real plugin bug
    still shows."""
    if any(p.is_error and p.code != "SR115" for p in found):
        return [p for p in resolve_problems if p.code != "SR115"]
    return resolve_problems


def _resolve(
    registry: Registry, config: SpecConfig, algorithm: AlgorithmSpec, skip: frozenset[str]
) -> Resolution:
    candidates: Sequence[SpecConfig] = [config]
    if config.candidate_steps:
        candidates = [
            config.evolve(num_steps=s, num_draft_tokens=s + 1, candidate_steps=None)
            for s in sorted(config.candidate_steps)
            if s > 0
        ] or [config]
    resolved_main = _resolve_config(registry, config, algorithm, skip)
    gammas: list[int] = []
    target: dict[Any, int] = {}
    draft: dict[Any, int] = {}
    for candidate in candidates:
        resolved = (
            resolved_main
            if candidate is config
            else _resolve_config(registry, candidate, algorithm, skip)
        )
        gammas.append(
            _int_result(
                registry, "specreg_resolve_gamma", skip, config=resolved, algorithm=algorithm
            )
        )
        for phase in PHASES:
            for is_draft, table in ((False, target), (True, draft)):
                width = _int_result(
                    registry,
                    "specreg_num_tokens_per_req",
                    skip,
                    config=resolved,
                    algorithm=algorithm,
                    phase=phase,
                    is_draft_worker=is_draft,
                )
                table[phase] = max(table.get(phase, 0), width)
    return Resolution(config=resolved_main, gamma=max(gammas), target=target, draft=draft)


def _resolve_config(
    registry: Registry, config: SpecConfig, algorithm: AlgorithmSpec, skip: frozenset[str]
) -> SpecConfig:
    resolved = registry.call_hook(
        "specreg_resolve_config", skip=skip, firstresult=True, config=config, algorithm=algorithm
    )
    if not isinstance(resolved, SpecConfig):
        raise PluginError(
            problem(
                "SR115",
                f"specreg_resolve_config returned {type(resolved).__name__} for {algorithm.name!r}",
                accepted="a SpecConfig",
                fix="return config.evolve(...) from the plugin's hook",
            )
        )
    return resolved


def _int_result(registry: Registry, hook_name: str, skip: frozenset[str], **kwargs: Any) -> int:
    value = registry.call_hook(hook_name, skip=skip, firstresult=True, **kwargs)
    if not isinstance(value, int) or isinstance(value, bool) or value < 0:
        detail = ", ".join(f"{k}={v}" for k, v in kwargs.items() if k in ("phase",))
        raise PluginError(
            problem(
                "SR115",
                f"{hook_name}({detail}) for {kwargs['algorithm'].name!r} returned {value!r}",
                accepted="an int >= 0",
                fix="return an int from the owning plugin's hook",
            )
        )
    return value


def _dedupe(problems: Iterable[Problem]) -> list[Problem]:
    seen: set[tuple[str, str]] = set()
    out = []
    for p in problems:
        key = (p.code, p.message)
        if key not in seen:
            seen.add(key)
            out.append(p)
    return out
