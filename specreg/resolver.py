"""Config resolution: one pass of the hooks per config, and the `SpecPlan` it yields.

The pass: resolve the config (fill unset parameters), derive the adaptive candidates, size the
config and every candidate in one call (gamma and every phase's width on both workers), then
every plugin's validation, all problems reported together; finally the verifier, drafter and
cache swapper, each checked against its `specreg.protocols` protocol. Every hook runs at most
once per plugin, and only on the plugins the config concerns: those that registered its
algorithm or cache (and were not overridden for it), those that registered no spec at all, and
the default plugin. A `memo` dict lives for the pass so a plugin derives what it needs once. The resolver knows the registry only
through the `HookTables` protocol, so neither module imports the other's internals.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Protocol

import attrs

from specreg.backend import requested_backend
from specreg.config import SpecConfig
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
from specreg.phase import PHASES
from specreg.plan import SpecPlan
from specreg.plugin_info import PluginInfo
from specreg.protocols import (
    DRAFTER_PROTOCOLS,
    VERIFIER_PROTOCOLS,
    CacheSwapperProtocol,
    missing_members,
)
from specreg.resolution import Candidate, Resolution, Sizes, adaptive_steps
from specreg.specs import AlgorithmSpec, CacheSpec
from specreg.translate import config_from_flags

DEFAULT_PLUGIN = "specreg.default"
_LEGACY_SIZE_HOOKS = ("specreg_resolve_gamma", "specreg_num_tokens_per_req")


class HookTables(Protocol):
    """What resolution needs from a registry: spec lookup and plugin-by-plugin hook calls."""

    def get_algorithm(self, name: str) -> AlgorithmSpec: ...

    def get_cache(self, name: str) -> CacheSpec: ...

    def shadowed(self, name: str) -> frozenset[str]: ...

    def bystanders(self, *names: str) -> frozenset[str]: ...

    def plugins(self) -> list[PluginInfo]: ...

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
    drafting = found.algorithm.drafting
    verifier = _build(
        tables, "specreg_make_verifier", found.skip, VERIFIER_PROTOCOLS[drafting],
        algorithm=found.algorithm, **args,
    )
    _check_verify_mode(resolution.config, found.algorithm.name, verifier)
    drafter = _build(
        tables, "specreg_make_drafter", found.skip, DRAFTER_PROTOCOLS[drafting],
        algorithm=found.algorithm, **args,
    )
    swapper = None
    if found.cache is not None:
        swapper = _build(
            tables, "specreg_make_cache_swapper", found.skip, CacheSwapperProtocol,
            cache=found.cache, **args,
        )
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


def _check_verify_mode(config: SpecConfig, algorithm: str, verifier: Any) -> None:
    """SR133 when the config asks for the invariant verify mode and the plan's verifier does
    not run it (it does not say `verify_mode == 'invariant'`): running the standard rule instead
    would be a silent fallback."""
    if config.verify_mode != "invariant" or getattr(verifier, "verify_mode", None) == "invariant":
        return
    raise ConfigError(
        problem(
            "SR133",
            f"{algorithm}: the plan's verifier ({type(verifier).__name__}) does not run the "
            "invariant verify mode",
            accepted="a verifier built with the config's verify_mode (specreg's ChainVerifier, "
            "BlockVerifier, LookupVerifier and EagleVerifier take it)",
            fix="leave verify_mode unset for this algorithm; plugin authors: pass "
            "config.verify_mode to the verifier specreg_make_verifier returns, and set its "
            "verify_mode attribute",
            field="verify_mode",
        )
    )


def _requested_backend() -> tuple[str, list[Problem]]:
    """SPECREG_KERNEL_BACKEND as the plan will keep it, and SR116 when it names no backend (an
    environment problem, reported with the config's, by `check` and `resolve` alike)."""
    try:
        return requested_backend(), []
    except KernelInputError as exc:
        return "auto", list(exc.problems)


def _build(
    tables: HookTables, hook_name: str, skip: frozenset[str], protocol: type, **kwargs: Any
) -> Any:
    plugin, obj = tables.call_hook_named(hook_name, skip=skip, **kwargs)
    if obj is None:
        return None
    missing = missing_members(obj, protocol)
    if missing:
        raise PluginError(
            problem(
                "SR123",
                f"plugin {plugin!r} returned {type(obj).__name__} from {hook_name}, which "
                f"breaks {protocol.__name__}: missing or mismatched {', '.join(missing)}",
                accepted=f"an object with every member of specreg.protocols.{protocol.__name__}",
                fix="report it to the plugin's authors; plugin authors: add the members (the "
                "conformance kit lists them)",
                field=hook_name,
            )
        )
    return obj


def _run_pass(tables: HookTables, config: SpecConfig | Mapping[str, Any]) -> _Pass:
    if not isinstance(config, SpecConfig):
        config = config_from_flags(config)
    algorithm, cache, lookup_problems = _lookup(tables, config)
    skip = tables.shadowed(algorithm.name)
    skip |= tables.shadowed(cache.name) if cache else frozenset()
    skip |= tables.bystanders(algorithm.name, *([cache.name] if cache else []))
    memo: dict[str, Any] = {}
    problems: list[Problem] = list(lookup_problems)  # an unknown cache hides nothing else
    # errors the translation found without stopping the config (SR178: no draft checkpoint)
    problems += [n for n in config.notices if n.is_error]
    resolution: Resolution | None = None
    resolve_problems: list[Problem] = []
    try:
        resolution = _resolve(tables, config, algorithm, skip, memo)
    except SpecRegError as exc:
        resolve_problems += exc.problems
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
        for item in found:
            if not isinstance(item, Problem):
                item = problem(
                    "SR114",
                    f"plugin {plugin!r} returned {type(item).__name__} from "
                    "specreg_validate_config instead of specreg.Problem",
                    fix="return a list of specreg.Problem",
                )
            (generic if plugin == DEFAULT_PLUGIN else problems).append(item)
    # A plugin's own error about a field replaces the generic range message for it.
    owned = {p.field for p in problems if p.is_error and p.field}
    problems += [p for p in generic if not (p.is_error and p.field in owned)]
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
    """The resolve hooks' problems, less SR115 (a hook returned nonsense) when validation
    already found an error in the user's input: the hook only echoed that input, so blaming the
    plugin would point the user at the wrong party. Once the input is fixed, a real plugin bug
    still shows."""
    if any(p.is_error and p.code != "SR115" for p in found):
        return [p for p in resolve_problems if p.code != "SR115"]
    return resolve_problems


def _resolve(
    tables: HookTables,
    config: SpecConfig,
    algorithm: AlgorithmSpec,
    skip: frozenset[str],
    memo: dict[str, Any],
) -> Resolution:
    common: dict[str, Any] = {"skip": skip, "firstresult": True, "algorithm": algorithm, "memo": memo}
    resolved = _expect_config(
        tables.call_hook("specreg_resolve_config", config=config, **common), algorithm
    )
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
    sizes = tables.call_hook("specreg_resolve_sizes", configs=configs, **common)
    if (
        not isinstance(sizes, Sequence)
        or len(sizes) != len(configs)
        or not all(isinstance(s, Sizes) for s in sizes)
    ):
        raise _bad_answer(
            "specreg_resolve_sizes", algorithm, sizes,
            f"a list of {len(configs)} specreg.Sizes, one per config",
        )
    sizes = [
        _per_config_overrides(tables, c, s, algorithm, skip)
        for c, s in zip(configs, sizes, strict=True)
    ]
    return Resolution(
        config=resolved,
        main=sizes[0],
        candidates=tuple(
            Candidate(steps=s, config=c, sizes=z)
            for s, c, z in zip(steps, candidates, sizes[1:], strict=True)
        ),
    )


def _per_config_overrides(
    tables: HookTables, config: SpecConfig, sizes: Sizes, algorithm: AlgorithmSpec,
    skip: frozenset[str],
) -> Sizes:
    """Answers of the per-config hooks (`specreg_resolve_gamma`, `specreg_num_tokens_per_req`)
    replace the sizes hook's; they are called only when some plugin implements them."""
    gamma = sizes.gamma
    if tables.has_hook("specreg_resolve_gamma", skip=skip):
        answer = tables.call_hook(
            "specreg_resolve_gamma", skip=skip, firstresult=True, config=config,
            algorithm=algorithm,
        )
        gamma = gamma if answer is None else _expect_int("specreg_resolve_gamma", answer, algorithm)
    target, draft = dict(sizes.target), dict(sizes.draft)
    if tables.has_hook("specreg_num_tokens_per_req", skip=skip):
        for phase in PHASES:
            for table, is_draft in ((target, False), (draft, True)):
                answer = tables.call_hook(
                    "specreg_num_tokens_per_req", skip=skip, firstresult=True, config=config,
                    algorithm=algorithm, phase=phase, is_draft_worker=is_draft,
                )
                if answer is not None:
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

