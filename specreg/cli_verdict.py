"""The one verdict `specreg check` and `specreg plan` give a command line, so both exit alike.

Every problem at once, in the order a user meets them: the flags' own (SR143, SR108, SR181, the
budgets' sizes), the config's (`Registry.check`), SGLang's runtime rules for the resolved sizes
(`specreg.framework_findings`), what building the plan's objects finds (SR123, SR124, SR126)
and the memory budgets (SR145). `plan` builds the objects; `check`, which imports neither torch
nor triton, builds those that need neither (`specreg.torch_free`) and says when it could not.
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from specreg.cli_args import memory_budgets, parse_config_flags
from specreg.errors import Problem, SpecRegError
from specreg.framework_findings import framework_findings

BUDGET_FLAGS = ("--memory-budget", "--host-memory-budget")


@attrs.frozen
class Verdict:
    """What a command line's config comes to: its problems, the plan when `plan` built one,
    and whether the plan's objects were built and checked at all."""

    problems: tuple[Problem, ...]
    plan: Any = None
    objects_checked: bool = False

    @property
    def errors(self) -> list[Problem]:
        return [p for p in self.problems if p.is_error]

    @property
    def status(self) -> int:
        """1 when any problem is an error, else 0 (the CLI's exit status)."""
        return 1 if self.errors else 0


def config_verdict(registry: Any, args: argparse.Namespace, *, build: bool) -> Verdict:
    """The verdict on the config `args` give. `build=True` (`plan`) builds the plan's objects
    with whatever they import; otherwise (`check`) only where that needs no torch or triton.
    A memory budget always needs the objects (each states its own bytes)."""
    data, problems = parse_config_flags(args)
    device, host, budget_problems = memory_budgets(args)
    problems += budget_problems
    substitutions_known = not any(p.code == "SR181" for p in problems)
    if "speculative_algorithm" in data or not problems:
        try:
            problems += registry.check(data)
            problems += framework_findings(
                registry, data, substitutions_known=substitutions_known
            )
        except SpecRegError as exc:
            problems += exc.problems
    if any(p.is_error for p in problems):
        return Verdict(tuple(problems))
    budgets = device is not None or host is not None
    plan, found, checked = _built(registry, data, with_heavy_imports=build or budgets)
    problems += found
    if plan is not None:
        problems += plan.memory().budget_problems(
            device_budget=device, host_budget=host, flags=BUDGET_FLAGS
        )
    return Verdict(tuple(problems), plan if build else None, checked)


def _built(
    registry: Any, data: dict[str, Any], *, with_heavy_imports: bool
) -> tuple[Any, list[Problem], bool]:
    """(the plan or None, what building it found, whether its objects were built)."""
    if with_heavy_imports:
        try:
            return registry.resolve(data), [], True
        except SpecRegError as exc:
            return None, list(exc.problems), True
    from specreg.torch_free import heavy_imports_refused

    with heavy_imports_refused() as refuser:
        try:
            registry.resolve(data)
            found: list[Problem] = []
        except SpecRegError as exc:
            found = list(exc.problems)
    if refuser.attempted:  # an object needs torch: `plan` builds it
        return None, [], False
    return None, found, True
