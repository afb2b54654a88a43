"""The one verdict `specreg check` and `specreg plan` give a command line, so both exit alike.

Every problem at once, in the order a user meets them: the flags' own (SR143, SR108, SR181, the
budgets' sizes), the config's (`Registry.check`), SGLang's runtime rules for the resolved sizes
(`specreg.cli.framework_findings`), what building the plan's objects finds (SR123, SR124, SR126)
and the memory budgets (SR145). `plan` builds the objects in its own process. `check`, which
imports neither torch nor triton, builds them with those imports refused
(`specreg.cli.torch_free`); where an object needs one of them it builds them again in a child
process (`specreg.cli.child_build`), so its verdict holds the same codes as `plan`'s.
`check --no-torch-build` skips the child, and then says the objects were not checked.
"""

from __future__ import annotations

import argparse
from typing import Any

import attrs

from specreg.cli.child_build import build_in_child, objects_problems
from specreg.cli.args import memory_budgets, parse_config_flags
from specreg.errors import Problem, SpecRegError
from specreg.cli.framework_findings import framework_findings


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
    here, with whatever they import; otherwise (`check`) without importing torch or triton here
    (see the module). A memory budget needs the objects too (each states its own bytes)."""
    data, problems = parse_config_flags(args, registry.substitutions())
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
    if build:
        plan, found = objects_problems(registry, data, device, host)
        return Verdict(tuple(problems + found), plan, True)
    found, checked = _built_torch_free(
        registry, data, device, host, child=not getattr(args, "no_torch_build", False)
    )
    return Verdict(tuple(problems + found), None, checked)


def _built_torch_free(
    registry: Any, data: dict[str, Any], device: int | None, host: int | None, *, child: bool
) -> tuple[list[Problem], bool]:
    """(what building the plan's objects found, whether they were built) without importing
    torch or triton here: in this process when the objects need neither, else in a child
    process (`child=False`: not at all)."""
    from specreg.cli.torch_free import heavy_imports_refused

    found: list[Problem] = []
    with heavy_imports_refused() as refuser:
        try:
            _, found = objects_problems(registry, data, device, host)
        except Exception:
            if not refuser.attempted:
                raise
    if not refuser.attempted:
        return found, True
    if not child:
        return [], False
    return build_in_child(data, device_budget=device, host_budget=host), True
