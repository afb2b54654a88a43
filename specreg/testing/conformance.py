"""The conformance kit: the contract every algorithm and cache plugin must meet.

`check_algorithm(registry, name)` and `check_cache(registry, name)` return a report and raise
`ConformanceError` listing every failed clause: widths and gamma, coded problems out of range,
the per-step protocols (`specreg.protocols`) of the plan's verifier, drafter and swapper,
adaptive candidates (the verifier accepts every candidate's width and generation is lossless at
each), and lossless generation. Plugins shipped with specreg run them in specreg's own tests;
plugin authors run them through the pytest plugin (`specreg.testing.pytest_plugin`).
"""

from __future__ import annotations

import itertools
import warnings
from collections.abc import Iterable, Mapping
from typing import Any

import attrs
import torch

from specreg.errors import Problem, SpecRegError, problem
from specreg.integers import is_int
from specreg.phase import PHASES, Phase
from specreg.plan import SpecPlan
from specreg.protocols import (
    DRAFTER_PROTOCOLS,
    VERIFIER_PROTOCOLS,
    CacheSwapperProtocol,
    missing_members,
)
from specreg.registry import Registry
from specreg.specs import AlgorithmSpec
from specreg.testing.drafter_checks import no_drafting_code
from specreg.testing.lossless import check_greedy, check_sampling
from specreg.testing.toy_model import ToyConfig, ToyLM


class ConformanceNotice(UserWarning):
    """Something a passing report must not hide (SR151: the toy model drafted, not the plugin)."""


class ConformanceError(AssertionError):
    """Some clauses of the plugin contract failed; `failures` lists them."""

    def __init__(self, subject: str, failures: list[str]) -> None:
        self.failures = failures
        super().__init__(f"{subject} fails {len(failures)} clause(s):\n  - " + "\n  - ".join(failures))


@attrs.define
class ConformanceReport:
    subject: str
    checked: list[str] = attrs.field(factory=list)
    failures: list[str] = attrs.field(factory=list)
    notices: list[str] = attrs.field(factory=list)

    def notice(self, found: Problem | None) -> None:
        """Record a notice once, and warn with it so a passing pytest run shows it too."""
        if found is not None and found.render() not in self.notices:
            self.notices.append(found.render())
            warnings.warn(ConformanceNotice(f"{self.subject}: {found.render()}"), stacklevel=3)

    def clause(self, name: str, ok: bool, detail: str = "") -> None:
        self.checked.append(name)
        if not ok:
            self.failures.append(f"{name}: {detail}" if detail else name)

    def raise_if_failed(self) -> ConformanceReport:
        if self.failures:
            raise ConformanceError(self.subject, self.failures)
        return self


def _probe_values(allowed: Any, limit: int) -> list[int]:
    low = allowed.minimum
    high = allowed.maximum if allowed.maximum is not None else low + limit
    return sorted({low, min(low + 1, high), min(low + 2, high), allowed.default or low, min(high, low + limit)})


def valid_configs(
    registry: Registry, algorithm: AlgorithmSpec, base: Mapping[str, Any], limit: int = 4
) -> list[dict[str, Any]]:
    """The base config (defaults) plus a small grid over the declared ranges, kept where
    `registry.check` finds no error."""
    grid = itertools.product(
        _probe_values(algorithm.num_steps, limit),
        _probe_values(algorithm.topk, limit),
        _probe_values(algorithm.num_draft_tokens, limit * 2),
    )
    out = []
    candidates = [dict(base)] + [
        {**base, "num_steps": steps, "topk": topk, "num_draft_tokens": n} for steps, topk, n in grid
    ]
    for config in candidates:
        if not any(p.is_error for p in registry.check(config)):
            out.append(config)
    return out


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
    report.clause(
        "has valid configs in its declared ranges", bool(configs),
        "none of the probes passed check(); the defaults': "
        + "; ".join(p.render() for p in registry.check(base) if p.is_error),
    )
    for config in configs:
        try:
            plan = registry.resolve(config)
        except SpecRegError as exc:
            report.clause(f"resolves {config}", False, str(exc))
            continue
        report.notice(no_drafting_code(plan))
        for phase, is_draft in itertools.product(PHASES, (False, True)):
            width = plan.num_tokens_per_req(phase, is_draft_worker=is_draft)
            report.clause(
                f"width {phase.value} ({'draft' if is_draft else 'target'}) > 0 for {config}",
                is_int(width) and width > 0,
                f"got {width!r}",
            )
        report.clause(
            f"gamma < target_verify width for {config}",
            0 < plan.gamma < plan.num_tokens_per_req(Phase.TARGET_VERIFY) + 1,
            f"gamma {plan.gamma}",
        )
        _protocol_clauses(report, plan, config)

    for config in out_of_range_configs(algorithm, base):
        # An error, or a warning where the algorithm fixes the parameter and ignores the value.
        problems = registry.check(config)
        reported = bool(problems) and all(_known(registry, p.code) and p.fix for p in problems)
        report.clause(
            f"reports a coded problem with a fix for {config}",
            reported,
            f"problems: {[p.render() for p in problems]}" if problems else "",
        )
        if not problems:
            report.failures[-1] = silent_out_of_range(registry, algorithm, config).render()

    adaptive = adaptive_configs(registry, algorithm, base)
    for config in adaptive:
        plan = registry.resolve(config)
        _candidate_clauses(report, plan, config)

    if lossless and configs:
        toy = ToyConfig()
        target = ToyLM(toy, seed=seed)
        draft = target.perturbed(0.25, seed=seed + 1)
        prompts = torch.randint(0, toy.vocab_size - 1, (3, 24), generator=torch.Generator().manual_seed(seed))
        for config in adaptive[:1]:  # the verify at every candidate width, lossless
            plan = registry.resolve(config)
            if plan.num_tokens_per_req(Phase.TARGET_VERIFY) > toy.window:
                continue
            for candidate in plan.candidates:
                try:
                    greedy = check_greedy(plan, target, draft, prompts, 16, steps=candidate.steps)
                    ok, detail = greedy.passed, f"first mismatch at column {greedy.first_mismatch}"
                except Exception as exc:  # noqa: BLE001 - a candidate the kernels refuse is a failure
                    ok, detail = False, f"{type(exc).__name__}: {exc}"
                report.clause(
                    f"greedy output at candidate step {candidate.steps} (verify width "
                    f"{candidate.sizes.verify_width}) equals plain greedy for {config}",
                    ok, detail,
                )
        for config in _spread(configs, 2):
            plan = registry.resolve(config)
            if plan.num_tokens_per_req(Phase.TARGET_VERIFY) > toy.window:
                continue
            try:
                greedy = check_greedy(plan, target, draft, prompts, 24)
                report.clause(
                    f"greedy output equals plain greedy decoding for {config}",
                    greedy.passed,
                    f"first mismatch at column {greedy.first_mismatch}",
                )
                sampled = check_sampling(plan, target, draft, prompts[0], samples=samples, seed=seed)
                report.clause(
                    f"sampled tokens follow the target distribution for {config}",
                    sampled.passed,
                    f"chi-square p-values {sampled.p_values}",
                )
            except SpecRegError as exc:  # coded already (a drafter's bad proposals: SR147/148)
                report.clause(f"generation runs for {config}", False, str(exc))
            except AssertionError as exc:  # a width disagreeing with the kernels' shapes
                report.clause(f"kernel shapes agree with the widths for {config}", False, str(exc))
            except Exception as exc:  # noqa: BLE001 - a plugin's kernel crashing is a failure to report
                report.clause(
                    f"generation runs for {config}", False, f"{type(exc).__name__}: {exc}"
                )
    return report.raise_if_failed()


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
            report.clause(
                f"plan.{role} exists for {config}",
                role == "cache_swapper" or (role == "drafter" and drafting == "chain"),
                f"a {drafting} algorithm's plan needs a {role} ({protocol.__name__})",
            )
            continue
        missing = missing_members(obj, protocol)
        report.clause(
            f"plan.{role} satisfies {protocol.__name__} for {config}",
            not missing,
            f"missing or mismatched: {', '.join(missing)}",
        )


def _candidate_clauses(report: ConformanceReport, plan: SpecPlan, config: Any) -> None:
    """The plan's maxima cover every candidate, and the verifier accepts every candidate's width."""
    widths = tuple(getattr(plan.verifier, "widths", ()))
    top = plan.num_tokens_per_req(Phase.TARGET_VERIFY)
    report.clause(
        f"verifier sized for the plan's maxima for {config}",
        getattr(plan.verifier, "num_draft_tokens", None) == top,
        f"verifier num_draft_tokens {getattr(plan.verifier, 'num_draft_tokens', None)}, plan {top}",
    )
    for candidate in plan.candidates:
        width = candidate.sizes.verify_width
        report.clause(
            f"candidate step {candidate.steps}: width {width} within the plan's maxima and "
            f"accepted by the verifier for {config}",
            width <= top and candidate.gamma <= plan.gamma and width in widths,
            f"verifier widths {list(widths)}, plan maxima {top} / gamma {plan.gamma}",
        )


def _spread(items: list[Any], count: int) -> Iterable[Any]:
    if len(items) <= count:
        return items
    step = (len(items) - 1) / (count - 1)
    return [items[round(i * step)] for i in range(count)]


def _known(registry: Registry, code: str) -> bool:
    """Whether `registry`'s catalog (the core's and its plugins' entries) defines `code`."""
    try:
        registry.catalog.lookup(code)
    except KeyError:
        return False
    return True


def check_cache(
    registry: Registry,
    name: str,
    *,
    algorithm_config: Mapping[str, Any] | None = None,
    seed: int = 0,
    calls: int = 40,
) -> ConformanceReport:
    """Run the cache contract: resolves with an algorithm, and nothing is lost end to end.

    `algorithm_config` names the algorithm to pair the cache with (default: the first
    registered algorithm whose config with this cache draws no problem from `registry.check`,
    not even a notice)."""
    from specreg.testing.kv import swap_property_check

    cache = registry.get_cache(name)
    report = ConformanceReport(f"cache {cache.name!r}")
    config = {**(algorithm_config or _first_algorithm(registry, cache.name)), "cache": cache.name}
    try:
        plan = registry.resolve(config)
    except SpecRegError as exc:
        report.clause(f"resolves with {config}", False, str(exc))
        return report.raise_if_failed()
    report.clause("builds a swapper", plan.cache_swapper is not None, "make_cache_swapper returned None")
    if plan.cache_swapper is None:
        return report.raise_if_failed()
    missing = missing_members(plan.cache_swapper, CacheSwapperProtocol)
    report.clause(
        "the swapper satisfies CacheSwapperProtocol", not missing,
        f"missing or mismatched: {', '.join(missing)}",
    )
    toy = ToyConfig()
    target = ToyLM(toy, seed=seed)
    draft = target.perturbed(0.25, seed=seed + 1)
    prompts = torch.randint(0, toy.vocab_size - 1, (3, 24), generator=torch.Generator().manual_seed(seed))
    greedy = check_greedy(plan, target, draft, prompts, 24)
    report.clause(
        "greedy output through the cache equals plain greedy decoding",
        greedy.passed,
        f"first mismatch at column {greedy.first_mismatch}",
    )
    lost = swap_property_check(plan, target, calls=calls, seed=seed)
    report.clause("nothing lost over random swap calls", not lost, "; ".join(lost[:5]))
    return report.raise_if_failed()


def _first_algorithm(registry: Registry, cache: str) -> dict[str, Any]:
    for algorithm in registry.algorithms():
        config = {"algorithm": algorithm.name, "cache": cache}
        if not registry.check(config):
            return {"algorithm": algorithm.name}
    return {"algorithm": registry.algorithms()[0].name} if registry.algorithms() else {}


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
