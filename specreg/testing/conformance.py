"""The conformance kit: the contract every algorithm and cache plugin must meet.

`check_algorithm(registry, name)` (and `check_cache`, `specreg.testing.conformance_cache`)
return a report (`specreg.testing.conformance_report`) and raise `ConformanceError` naming
every failed clause,
each with a catalog code and one sentence: configs that resolve (and no plugin fault, such as a
given number the resolution ignores, on a config that gives one number), widths and gamma, coded
problems out of range, the per-step protocols (`specreg.contract.protocols`) of the plan's verifier,
drafter and swapper, adaptive candidates (the verifier accepts every candidate's width and
generation is lossless at each), and lossless generation. Plugins shipped with specreg run them
in specreg's own tests; plugin authors run them through the pytest plugin
(`specreg.testing.pytest_plugin`).
"""

from __future__ import annotations

import itertools
from collections.abc import Mapping
from typing import Any

from specreg.errors import Problem, SpecRegError, problem
from specreg.integers import is_int
from specreg.contract.phase import PHASES, Phase
from specreg.registry.plan import SpecPlan
from specreg.registry.plan_checks import PLUGIN_FAULTS
from specreg.contract.protocols import (
    DRAFTER_PROTOCOLS,
    VERIFIER_PROTOCOLS,
    CacheSwapperProtocol,
    missing_members,
)
from specreg.registry.registry import Registry
from specreg.contract.specs import AlgorithmSpec
from specreg.testing.conformance_lossless import lossless_clauses
from specreg.testing.conformance_report import (
    Clause,
    ConformanceError,
    ConformanceNotice,
    ConformanceReport,
)
from specreg.testing.drafter_checks import no_drafting_code

__all__ = ["Clause", "ConformanceError", "ConformanceNotice", "ConformanceReport", "check_algorithm"]



def _probe_values(allowed: Any, limit: int) -> list[int]:
    low = allowed.minimum
    high = allowed.maximum if allowed.maximum is not None else low + limit
    return sorted({low, min(low + 1, high), min(low + 2, high), allowed.default or low, min(high, low + limit)})


def _is_chain(algorithm: AlgorithmSpec) -> bool:
    return algorithm.drafting == "chain" and algorithm.topk.minimum == 1


def probe_configs(algorithm: AlgorithmSpec, base: Mapping[str, Any], limit: int = 4) -> list[dict[str, Any]]:
    """The base config (defaults) plus a small grid over the declared ranges; a chain's probes
    keep num_steps = num_draft_tokens - 1 (other pairs contradict each other, SR127)."""
    grid = list(itertools.product(
        _probe_values(algorithm.num_steps, limit),
        _probe_values(algorithm.topk, limit),
        _probe_values(algorithm.num_draft_tokens, limit * 2),
    ))
    if _is_chain(algorithm):  # a chain's steps follow its width
        grid = [(n - 1, k, n) for _, k, n in grid if k == 1]
    numbers = dict.fromkeys(grid)  # in order, each once
    return [dict(base), *({**base, "num_steps": s, "topk": k, "num_draft_tokens": n}
                          for s, k, n in numbers)]


def one_number_configs(algorithm: AlgorithmSpec, base: Mapping[str, Any], limit: int = 4) -> list[dict[str, Any]]:
    """Configs that give one number each (num_steps alone, num_draft_tokens alone): whatever
    the plugin infers from it, no plugin fault may follow."""
    return [
        {**base, field: value}
        for field in ("num_steps", "num_draft_tokens")
        for value in _probe_values(getattr(algorithm, field), limit)[:3]
    ]


def plugin_faults(
    registry: Registry, algorithm: AlgorithmSpec, base: Mapping[str, Any]
) -> list[tuple[dict[str, Any], Problem]]:
    """Each config giving one number (`one_number_configs`, on `base` less its numbers) with
    the plugin faults `registry.check` finds in it: what the user may not be blamed for."""
    bare = {k: v for k, v in base.items() if k not in ("num_steps", "topk", "num_draft_tokens")}
    return [
        (config, found)
        for config in one_number_configs(algorithm, bare)
        for found in registry.check(config)
        if found.is_error and found.code in PLUGIN_FAULTS
    ]


def valid_configs(
    registry: Registry, algorithm: AlgorithmSpec, base: Mapping[str, Any], limit: int = 4
) -> list[dict[str, Any]]:
    """The probe configs `registry.check` finds no error in."""
    return [c for c in probe_configs(algorithm, base, limit)
            if not any(p.is_error for p in registry.check(c))]


def out_of_range_configs(algorithm: AlgorithmSpec, base: Mapping[str, Any]) -> list[dict[str, Any]]:
    """One config per declared bound, just outside it."""
    out = []
    for field in ("num_steps", "topk", "num_draft_tokens"):
        allowed = getattr(algorithm, field)
        out.append({**base, field: allowed.minimum - 1})
        if allowed.maximum is not None:
            out.append({**base, field: allowed.maximum + 1})
    return out


def check_algorithm(
    registry: Registry,
    name: str,
    *,
    base_config: Mapping[str, Any] | None = None,
    lossless: bool = True,
    samples: int = 3000,
    seed: int = 0,
) -> ConformanceReport:
    """Run the algorithm contract. `base_config` adds keys (e.g. a draft_config) to every config."""
    algorithm = registry.get_algorithm(name)
    base = {"algorithm": algorithm.name, **(base_config or {})}
    report = ConformanceReport(f"algorithm {algorithm.name!r}")

    configs = valid_configs(registry, algorithm, base)
    _config_clauses(report, registry, algorithm, base, configs)
    plans = []
    for config in configs:
        plan = _resolved(report, registry, config)
        if plan is not None:
            plans.append((config, plan))
            report.notice(no_drafting_code(plan))
            _width_clauses(report, plan, config)
            _protocol_clauses(report, plan, config)
    for config in out_of_range_configs(algorithm, base):
        _range_clause(report, registry, algorithm, config)
    adaptive = []
    for config in adaptive_configs(registry, algorithm, base):
        plan = _resolved(report, registry, config, family="candidates")
        if plan is not None:
            adaptive.append((config, plan))
            _candidate_clauses(report, plan, config)
    if lossless and plans:
        lossless_clauses(report, plans, adaptive, samples=samples, seed=seed)
    return report.raise_if_failed()


def _config_clauses(
    report: ConformanceReport, registry: Registry, algorithm: AlgorithmSpec,
    base: Mapping[str, Any], configs: list[dict[str, Any]],
) -> None:
    """Valid configs exist (else every error of the defaults fails the clause), and a config
    giving one number draws no plugin fault."""
    name = "has valid configs in its declared ranges"
    if configs:
        report.record("configs", name)
    else:
        for error in [p for p in registry.check(base) if p.is_error] or [_no_probe(algorithm)]:
            report.record("configs", name, error)
    faults = plugin_faults(registry, algorithm, base)
    for config in one_number_configs(algorithm, base):
        clause = f"no plugin fault for {config}"
        found = [p for c, p in faults if c == config]
        if not found:
            report.record("configs", clause)
        for fault in found:
            report.record("configs", clause, fault)


def _no_probe(algorithm: AlgorithmSpec) -> Problem:
    return problem(
        "SR150",
        f"no probe of {algorithm.name!r} inside its declared ranges passed check(), and its "
        "defaults drew no error either",
        accepted="declared ranges whose values the plugin accepts",
        fix="declare the ranges the algorithm really takes in its AlgorithmSpec",
    )


def _resolved(
    report: ConformanceReport, registry: Registry, config: Mapping[str, Any],
    family: str = "configs",
) -> SpecPlan | None:
    """The plan of `config`, recording the clause that it resolves (every problem if not)."""
    try:
        plan = registry.resolve(config)
    except SpecRegError as exc:
        for found in exc.problems:
            report.record(family, f"resolves {config}", found)
        return None
    report.record(family, f"resolves {config}")
    return plan


def _width_clauses(report: ConformanceReport, plan: SpecPlan, config: Any) -> None:
    for phase, is_draft in itertools.product(PHASES, (False, True)):
        width = plan.num_tokens_per_req(phase, is_draft_worker=is_draft)
        worker = "draft" if is_draft else "target"
        report.record("widths", f"width {phase.value} ({worker}) > 0 for {config}",
                      None if is_int(width) and width > 0 else _sizes_problem(
                          plan, f"the {worker} worker's {phase.value} width is {width!r}"))
    verify = plan.num_tokens_per_req(Phase.TARGET_VERIFY)
    report.record("widths", f"0 < gamma < target_verify width for {config}",
                  None if 0 < plan.gamma < verify else _sizes_problem(
                      plan, f"gamma {plan.gamma} with a target_verify width of {verify}"))


def _sizes_problem(plan: SpecPlan, what: str) -> Problem:
    return problem(
        "SR125", f"the plan of {plan.algorithm.name!r} holds {what}",
        accepted="1 <= gamma < target_verify width and every width >= 1",
        fix="return gamma = num_draft_tokens - 1 for a chain or block (the number of draft "
        "nodes for a tree) and widths of at least 1 from the plugin's sizing hooks",
    )


def _range_clause(
    report: ConformanceReport, registry: Registry, algorithm: AlgorithmSpec, config: Any
) -> None:
    """An out-of-range value draws a problem (an error, or a warning where the algorithm fixes
    the parameter and ignores it) whose code a catalog defines and which names a fix."""
    name = f"reports a coded problem with a fix for {config}"
    problems = registry.check(config)
    if not problems:
        report.record("ranges", name, silent_out_of_range(registry, algorithm, config))
        return
    bad = [p for p in problems if not (_known(registry, p.code) and p.fix)]
    if not bad:
        report.record("ranges", name)
    for found in bad:
        report.record("ranges", name, problem(
            "SR156",
            f"{algorithm.name!r} reported {found.code} for {config}: "
            + ("a problem with no fix" if _known(registry, found.code) else
               "a code no catalog defines"),
            accepted="a problem with a registered code and a fix",
            fix="register the plugin's codes with specreg_register_errors (or reuse a core "
            "code) and pass fix=... to every problem(...)",
        ))


def adaptive_configs(
    registry: Registry, algorithm: AlgorithmSpec, base: Mapping[str, Any]
) -> list[dict[str, Any]]:
    """Configs with adaptive candidate steps the algorithm serves (registry.check finds no
    error), or none when it serves none of the probes."""
    out = []
    for steps in ([1, 2], [1, 3], [1]):
        config = {**base, "candidate_steps": steps}
        if not any(p.is_error for p in registry.check(config)):
            out.append(config)
    return out


def _protocol_clauses(report: ConformanceReport, plan: SpecPlan, config: Any) -> None:
    drafting = plan.algorithm.drafting
    wanted = {
        "verifier": VERIFIER_PROTOCOLS[drafting],
        "drafter": DRAFTER_PROTOCOLS[drafting],
        "cache_swapper": CacheSwapperProtocol,
    }
    for role, protocol in wanted.items():
        obj = getattr(plan, role)
        if obj is None:
            optional = role == "cache_swapper" or (role == "drafter" and drafting == "chain")
            report.record("protocols", f"plan.{role} exists for {config}", None if optional else
                          missing_object(plan.algorithm.name, role, drafting, protocol))
            continue
        missing = missing_members(obj, protocol)
        report.record("protocols", f"plan.{role} satisfies {protocol.__name__} for {config}",
                      missing and problem(
                          "SR123",
                          f"the plan's {role} {type(obj).__name__} breaks {protocol.__name__}: "
                          f"missing or mismatched {', '.join(missing)}",
                          accepted=f"every member of specreg.contract.protocols.{protocol.__name__}",
                          fix=f"give {type(obj).__name__} the members listed (the hook "
                          "reference's per-step contract shows each signature)",
                      ) or None)


def missing_object(subject: str, role: str, drafting: str, protocol: type) -> Problem:
    hook = "specreg_make_cache_swapper" if role == "cache_swapper" else f"specreg_make_{role}"
    return problem(
        "SR124",
        f"the plan of {subject!r} has no {role}: {hook} returned nothing, and a {drafting} "
        f"algorithm's plan needs one ({protocol.__name__})",
        accepted=f"a {protocol.__name__} object from {hook}",
        fix=f"implement {hook} returning a {protocol.__name__} object for {subject!r}",
    )


def _candidate_clauses(report: ConformanceReport, plan: SpecPlan, config: Any) -> None:
    """The plan's maxima cover every candidate, and the verifier accepts every candidate's width."""
    widths = tuple(getattr(plan.verifier, "widths", ()))
    top = plan.num_tokens_per_req(Phase.TARGET_VERIFY)
    sized = getattr(plan.verifier, "num_draft_tokens", None)
    report.record("candidates", f"verifier sized for the plan's maxima for {config}",
                  None if sized == top else _unsized(plan, f"verifier num_draft_tokens {sized}, "
                                                     f"the plan's {top}"))
    for candidate in plan.candidates:
        width = candidate.sizes.verify_width
        held = width <= top and candidate.gamma <= plan.gamma and width in widths
        report.record(
            "candidates",
            f"candidate step {candidate.steps}: width {width} within the plan's maxima and "
            f"accepted by the verifier for {config}",
            None if held else _unsized(plan, f"candidate step {candidate.steps} verifies "
                                       f"{width} tokens; verifier widths {list(widths)}, plan "
                                       f"maxima {top} / gamma {plan.gamma}"),
        )


def _unsized(plan: SpecPlan, what: str) -> Problem:
    return problem(
        "SR126", f"the plan of {plan.algorithm.name!r}: {what}",
        accepted="a verifier sized for the plan's maxima that accepts every candidate's width",
        fix="build the verifier from the resolution argument: num_draft_tokens = "
        "resolution.target[Phase.TARGET_VERIFY], widths = every resolution.configs() width",
    )


def _known(registry: Registry, code: str) -> bool:
    """Whether `registry`'s catalog (the core's and its plugins' entries) defines `code`."""
    try:
        registry.catalog.lookup(code)
    except KeyError:
        return False
    return True


def silent_out_of_range(
    registry: Registry, algorithm: AlgorithmSpec, config: Mapping[str, Any]
) -> Problem:
    """Why an out-of-range config drew no problem: a resolve_config that overwrote the user's
    value (SR149), or nobody checking the range (SR150)."""
    field, value = next(
        (f, config[f]) for f in ("num_steps", "topk", "num_draft_tokens") if f in config
    )
    allowed = getattr(algorithm, field).describe()
    try:
        resolved = getattr(registry.resolve(config).config, field)
    except SpecRegError:
        resolved = value
    if resolved != value:
        return problem(
            "SR149",
            f"specreg_resolve_config of {algorithm.name!r} changed {field} from {value} (given "
            f"by the user, outside {allowed}) to {resolved}, so check() reported nothing",
            accepted=f"a resolve_config that fills only unset fields; {field} in {allowed}",
            fix=f"in specreg_resolve_config set {field} only when config.{field} is None, and "
            "report values the algorithm cannot take from specreg_validate_config",
            field=field,
        )
    return problem(
        "SR150",
        f"{field}={value} is outside the declared range {allowed} of {algorithm.name!r}, "
        "and check() reported no problem",
        accepted="a coded Problem from specreg_validate_config, or the declared range enforced",
        fix=f"declare the real range of {field} in the AlgorithmSpec, or return a coded Problem "
        "for it from specreg_validate_config",
        field=field,
    )
