"""Config resolution: one pass of the hooks per config, and the `SpecPlan` it yields.

The pass: resolve the config (fill unset parameters), derive the adaptive candidates, size the
config and every candidate in one call (gamma and every phase's width on both workers), then
every plugin's validation, all problems reported together; finally the verifier, drafter and
cache swapper, each checked against its `specreg.contract.protocols` protocol and the plan's sizes
(`specreg.registry.plan_checks`: what cannot run is refused here, not at the first step). Every hook
runs at most once per plugin, and only on the plugins the config concerns: those that
registered its algorithm or cache (and were not overridden for it), those that registered no
spec at all, and the default plugin. A `memo` dict lives for the pass so a plugin derives what
it needs once. The resolver knows the registry only through the `HookTables` protocol, so
neither module imports the other's internals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs

from specreg.backend import requested_backend
from specreg.contract.config import SpecConfig
from specreg.errors import (
    ConfigError,
    KernelInputError,
    PluginError,
    Problem,
    SpecRegError,
    UnknownNameError,
    dedupe_problems,
    problem,
    split_problems,
)
from specreg.integers import int_range_text, is_int
from specreg.contract.phase import PHASES
from specreg.registry.plan import SpecPlan
from specreg.registry.plan_checks import (
    DEFAULT_VERIFIER_DRAFTING,
    PLUGIN_FAULTS,
    chain_steps_problems,
    missing_verifier,
    object_problems,
    sized_problems,
    sizes_problems,
    validate_answer_problems,
    verify_mode_problems,
)
from specreg.registry.plugin_info import PluginInfo
from specreg.contract.protocols import DRAFTER_PROTOCOLS, VERIFIER_PROTOCOLS, CacheSwapperProtocol
from specreg.contract.resolution import Candidate, Resolution, Sizes, adaptive_steps
from specreg.contract.specs import AlgorithmSpec, CacheSpec
from specreg.contract.substitutions import Substitution, problems_of
from specreg.registry.translate import config_from_flags

DEFAULT_PLUGIN = "specreg.default"
_LEGACY_SIZE_HOOKS = ("specreg_resolve_gamma", "specreg_num_tokens_per_req")
#: Plugin faults that may only echo a fault in the user's input: dropped while it has one.
_ECHO_CODES = ("SR115", "SR125")


class HookTables(Protocol):
    """What resolution needs from a registry: spec lookup and plugin-by-plugin hook calls."""

    def get_algorithm(self, name: str) -> AlgorithmSpec: ...

    def get_cache(self, name: str) -> CacheSpec: ...

    def shadowed(self, name: str) -> frozenset[str]: ...

    def bystanders(self, *names: str) -> frozenset[str]: ...

    def plugins(self) -> list[PluginInfo]: ...

    def substitutions(self) -> Mapping[str, Substitution]: ...

    def has_hook(self, hook_name: str, *, skip: frozenset[str]) -> bool: ...

    def call_hook(
        self, hook_name: str, *, skip: frozenset[str], firstresult: bool, **kwargs: Any
    ) -> Any: ...

    def call_hook_named(
        self, hook_name: str, *, skip: frozenset[str], **kwargs: Any
    ) -> tuple[str | None, Any]: ...


@attrs.frozen
class _Pass:
    """What one resolution pass found, before any kernel object is built."""

    algorithm: AlgorithmSpec
    cache: CacheSpec | None
    resolution: Resolution | None
    problems: list[Problem]
    skip: frozenset[str]
    memo: dict[str, Any]


def check_config(tables: HookTables, config: SpecConfig | Mapping[str, Any]) -> list[Problem]:
    """Every problem with `config` (errors and warnings), without raising."""
    try:
        found = _run_pass(tables, config).problems
    except SpecRegError as exc:
        found = list(exc.problems)
    return found + _requested_backend()[1]


def resolve_sizes(tables: HookTables, config: SpecConfig | Mapping[str, Any]) -> Resolution:
    """The pass's resolution (configs, gamma, widths) without building any object; raises one
    `ConfigError` listing every error."""
    found = _run_pass(tables, config)
    errors = split_problems(found.problems)[0]
    if errors or found.resolution is None:
        raise ConfigError(errors)
    return found.resolution


def resolve_plan(tables: HookTables, config: SpecConfig | Mapping[str, Any]) -> SpecPlan:
    """Validate `config`, resolve gamma and widths, build the kernels: a `SpecPlan`.

    Raises one `ConfigError` listing every problem found.
    """
    found = _run_pass(tables, config)
    backend, backend_problems = _requested_backend()  # read once: the plan keeps this choice
    errors, warnings = split_problems([*found.problems, *backend_problems])
    if errors:
        raise ConfigError(errors)
    resolution = found.resolution
    assert resolution is not None  # no error means the resolution hooks answered
    args = {"config": resolution.config, "resolution": resolution, "memo": found.memo}
    algorithm, drafting = found.algorithm, found.algorithm.drafting
    problems: list[Problem] = []
    verifier = _build(
        tables, "specreg_make_verifier", found.skip, VERIFIER_PROTOCOLS[drafting], problems,
        algorithm=algorithm, **args,
    )
    if verifier is None and not problems:  # none built (not one refused: that is reported)
        answered = tables.has_hook("specreg_make_verifier", skip=found.skip | {DEFAULT_PLUGIN})
        origin = algorithm.origin.plugin if algorithm.origin else None
        problems.append(missing_verifier(algorithm, answered, origin))
    drafter = _build(
        tables, "specreg_make_drafter", found.skip, DRAFTER_PROTOCOLS[drafting], problems,
        algorithm=algorithm, **args,
    )
    swapper = None
    if found.cache is not None:
        swapper = _build(
            tables, "specreg_make_cache_swapper", found.skip, CacheSwapperProtocol, problems,
            cache=found.cache, **args,
        )
    if problems:
        raise PluginError(problems)
    refused_mode = verify_mode_problems(resolution.config, algorithm.name, verifier)
    if refused_mode:
        raise ConfigError(refused_mode)
    return SpecPlan(
        algorithm=found.algorithm,
        cache=found.cache,
        resolution=resolution,
        verifier=verifier,
        drafter=drafter,
        cache_swapper=swapper,
        notices=tuple(warnings),
        plugins=tuple(tables.plugins()),
        kernel_backend=backend,
    )


def _requested_backend() -> tuple[str, list[Problem]]:
    """SPECREG_KERNEL_BACKEND as the plan will keep it, and SR116 when it names no backend (an
    environment problem, reported with the config's, by `check` and `resolve` alike)."""
    try:
        return requested_backend(), []
    except KernelInputError as exc:
        return "auto", list(exc.problems)


def _build(
    tables: HookTables, hook_name: str, skip: frozenset[str], protocol: type,
    problems: list[Problem], **kwargs: Any,
) -> Any:
    """The object `hook_name` returns, or None; what is wrong with it goes to `problems` (a
    class instead of an instance, a missing member: SR123; other sizes than the plan's:
    SR126), and then it is None too."""
    plugin, obj = tables.call_hook_named(hook_name, skip=skip, **kwargs)
    if obj is None:
        return None
    algorithm = kwargs.get("algorithm")
    wrong = object_problems(obj, hook_name, plugin, protocol, algorithm or kwargs["cache"])
    if algorithm is not None and not wrong:  # a cache swapper has no sizes of its own
        role = hook_name.removeprefix("specreg_make_")
        wrong = sized_problems(role, obj, plugin, algorithm, kwargs["resolution"])
    problems += wrong
    return None if wrong else obj


def _run_pass(tables: HookTables, config: SpecConfig | Mapping[str, Any]) -> _Pass:
    if not isinstance(config, SpecConfig):
        config = config_from_flags(config)
    algorithm, cache, lookup_problems = _lookup(tables, config)
    skip = tables.shadowed(algorithm.name)
    skip |= tables.shadowed(cache.name) if cache else frozenset()
    skip |= tables.bystanders(algorithm.name, *([cache.name] if cache else []))
    memo: dict[str, Any] = {}
    # an unknown cache or substitution hides nothing else
    problems = [*lookup_problems, *problems_of(config.substitutions, tables.substitutions())]
    # errors the translation found without stopping the config (SR178: no draft checkpoint)
    problems += [n for n in config.notices if n.is_error]
    resolution: Resolution | None = None
    resolve_problems: list[Problem] = []
    answered_by: dict[str, str] = {}
    try:
        resolution = _resolve(tables, config, algorithm, skip, memo, answered_by)
        resolve_problems += sizes_problems(algorithm, resolution, answered_by["sizes"])
    except SpecRegError as exc:
        resolve_problems += exc.problems
    if algorithm.drafting not in DEFAULT_VERIFIER_DRAFTING and not tables.has_hook(
        "specreg_make_verifier", skip=skip | {DEFAULT_PLUGIN}
    ):  # what resolve would find after building: said here, without building anything
        origin = algorithm.origin.plugin if algorithm.origin else None
        problems.append(missing_verifier(algorithm, False, origin))
    generic: list[Problem] = []  # the default plugin's rules, superseded per field below
    for plugin, found in tables.call_hook(
        "specreg_validate_config",
        skip=skip,
        firstresult=False,
        config=config,
        algorithm=algorithm,
        cache=cache,
        resolution=resolution,
        memo=memo,
    ):
        reported, wrong = validate_answer_problems(plugin, found)
        (generic if plugin == DEFAULT_PLUGIN else problems).extend(reported)
        problems += wrong
    # A plugin's own error about a field replaces the generic range message for it.
    owned = {p.field for p in problems if p.is_error and p.field}
    problems += [p for p in generic if not (p.is_error and p.field in owned)]
    problems += chain_steps_problems(  # after sizes that cannot run, a consequence of them
        config, algorithm, resolution, [*problems, *resolve_problems],
        answered_by.get("specreg_resolve_config", ""),
    )
    problems += consequences_dropped(resolve_problems, problems)
    problems = superseded_dropped(problems)
    return _Pass(algorithm, cache, resolution, dedupe_problems(problems), skip, memo)


def _lookup(
    tables: HookTables, config: SpecConfig
) -> tuple[AlgorithmSpec, CacheSpec | None, list[Problem]]:
    """The algorithm and cache specs, and the lookup problems; raises only when the algorithm
    is unknown, since nothing else can be checked without it."""
    problems: list[Problem] = []
    algorithm = cache = None
    try:
        algorithm = tables.get_algorithm(config.algorithm)
    except UnknownNameError as exc:
        problems += exc.problems
    if config.cache is not None:
        try:
            cache = tables.get_cache(config.cache)
        except UnknownNameError as exc:
            problems += exc.problems
    if algorithm is None:
        raise ConfigError(problems)
    return algorithm, cache, problems


def superseded_dropped(found: list[Problem]) -> list[Problem]:
    """Less the warnings about a field that an error already names (SR308, "no draft config,
    defaults assumed", says nothing more once SR178 refuses the missing draft checkpoint)."""
    errors = {p.field for p in found if p.is_error and p.field}
    return [p for p in found if p.is_error or p.field not in errors]


def consequences_dropped(resolve_problems: list[Problem], found: list[Problem]) -> list[Problem]:
    """The resolve hooks' problems, less SR115 (a hook returned nonsense) and SR125 (sizes that
    contradict each other) when validation already found an error in the user's input: the
    hook only echoed that input, so blaming the plugin would point the user at the wrong party.
    Once the input is fixed, a real plugin bug still shows."""
    if any(p.is_error and p.code not in PLUGIN_FAULTS for p in found):
        return [p for p in resolve_problems if p.code not in _ECHO_CODES]
    return resolve_problems


def _resolve(
    tables: HookTables,
    config: SpecConfig,
    algorithm: AlgorithmSpec,
    skip: frozenset[str],
    memo: dict[str, Any],
    answered_by: dict[str, str],
) -> Resolution:
    """The resolution hooks' answers; `answered_by` learns which hook and plugin gave the
    config and the sizes (for the problems that name them)."""
    common: dict[str, Any] = {"skip": skip, "firstresult": True, "algorithm": algorithm, "memo": memo}
    named = {k: v for k, v in common.items() if k != "firstresult"}
    plugin, answer = tables.call_hook_named("specreg_resolve_config", config=config, **named)
    answered_by["specreg_resolve_config"] = f"specreg_resolve_config of plugin {plugin!r}"
    resolved = _expect_config(answer, algorithm)
    steps = adaptive_steps(config)
    candidates: list[SpecConfig] = []
    if steps:
        derived = tables.call_hook("specreg_resolve_candidates", config=resolved, **common)
        if not isinstance(derived, Sequence) or len(derived) != len(steps):
            raise _bad_answer(
                "specreg_resolve_candidates", algorithm, derived,
                f"a list of {len(steps)} SpecConfig, one per candidate step {list(steps)}",
            )
        candidates = [_expect_config(c, algorithm) for c in derived]
    configs = [resolved, *candidates]
    plugin, sizes = tables.call_hook_named("specreg_resolve_sizes", configs=configs, **named)
    answered_by["sizes"] = f"specreg_resolve_sizes of plugin {plugin!r}"
    if (
        not isinstance(sizes, Sequence)
        or len(sizes) != len(configs)
        or not all(isinstance(s, Sizes) for s in sizes)
    ):
        raise _bad_answer(
            "specreg_resolve_sizes", algorithm, sizes,
            f"a list of {len(configs)} specreg.Sizes, one per config",
        )
    overridden = [
        _per_config_overrides(tables, c, s, algorithm, skip, answered_by)
        for c, s in zip(configs, sizes, strict=True)
    ]
    return Resolution(
        config=resolved,
        main=overridden[0],
        candidates=tuple(
            Candidate(steps=s, config=c, sizes=z)
            for s, c, z in zip(steps, candidates, overridden[1:], strict=True)
        ),
    )


def _per_config_overrides(
    tables: HookTables, config: SpecConfig, sizes: Sizes, algorithm: AlgorithmSpec,
    skip: frozenset[str], answered_by: dict[str, str],
) -> Sizes:
    """Answers of the per-config hooks (`specreg_resolve_gamma`, `specreg_num_tokens_per_req`)
    replace the sizes hook's; they are called only when some plugin implements them, and
    `answered_by` learns which plugin answered."""
    gamma = sizes.gamma
    if tables.has_hook("specreg_resolve_gamma", skip=skip):
        plugin, answer = tables.call_hook_named(
            "specreg_resolve_gamma", skip=skip, config=config, algorithm=algorithm
        )
        if answer is not None:
            answered_by["sizes"] = f"specreg_resolve_gamma of plugin {plugin!r}"
            gamma = _expect_int("specreg_resolve_gamma", answer, algorithm)
    target, draft = dict(sizes.target), dict(sizes.draft)
    if tables.has_hook("specreg_num_tokens_per_req", skip=skip):
        for phase in PHASES:
            for table, is_draft in ((target, False), (draft, True)):
                plugin, answer = tables.call_hook_named(
                    "specreg_num_tokens_per_req", skip=skip, config=config,
                    algorithm=algorithm, phase=phase, is_draft_worker=is_draft,
                )
                if answer is not None:
                    answered_by["sizes"] = f"specreg_num_tokens_per_req of plugin {plugin!r}"
                    table[phase] = _expect_int(
                        f"specreg_num_tokens_per_req(phase={phase})", answer, algorithm
                    )
    if gamma == sizes.gamma and target == sizes.target and draft == sizes.draft:
        return sizes
    return Sizes(gamma=gamma, target=target, draft=draft)


def _expect_config(value: Any, algorithm: AlgorithmSpec) -> SpecConfig:
    if not isinstance(value, SpecConfig):
        raise _bad_answer(
            "specreg_resolve_config", algorithm, value, "a SpecConfig",
            fix="return config.evolve(...) from the plugin's hook",
        )
    return value


def _expect_int(hook: str, value: Any, algorithm: AlgorithmSpec) -> int:
    if not is_int(value) or value < 0:
        raise _bad_answer(hook, algorithm, value, int_range_text(0, None))
    return value


def _bad_answer(
    hook: str, algorithm: AlgorithmSpec, value: Any, accepted: str,
    fix: str = "return it from the owning plugin's hook",
) -> PluginError:
    shown = type(value).__name__ if not isinstance(value, (int, str)) else repr(value)
    return PluginError(
        problem(
            "SR115",
            f"{hook} for {algorithm.name!r} returned {shown}",
            accepted=accepted,
            fix=fix,
        )
    )

