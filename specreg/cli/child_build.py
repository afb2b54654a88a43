"""Building a plan's objects in a child Python process, for `specreg check`.

`specreg check` imports neither torch nor triton, yet gives the verdict `specreg plan` gives,
which includes what building the plan's verifier, drafter and cache swapper finds (a class
where an instance belongs, SR123; an object built for other sizes than the plan's, SR126; a
memory budget exceeded, SR145). Where those objects need torch or triton (most do),
`build_in_child` builds them in a child process: the same interpreter (`sys.executable`),
the same module path and environment (so the same plugins, `SPECREG_PLUGINS` included) and the
same config, passed as JSON on its stdin. The child (`python -m specreg.cli.child_build`) resolves
the plan, checks the budgets and answers with the problems as JSON, so check's own process
never imports what the objects import. `objects_problems` is that build (`specreg plan` runs
it in its own process). A child that ends without an answer (it crashed, was killed, or an
object raised an uncoded exception) is SR157, quoting the last line of its error output.
Imports neither torch nor triton itself.
"""

from __future__ import annotations

import contextlib
import json
import os
import subprocess
import sys
from typing import Any

from specreg.errors import Problem, SpecRegError, problem

#: The line prefix of the child's answer on its stdout (a plugin may print there too).
ANSWER = "specreg-child-build: "
PROBLEM_FIELDS = ("code", "message", "accepted", "fix", "field", "severity")
BUDGET_FLAGS = ("--memory-budget", "--host-memory-budget")


def objects_problems(
    registry: Any, data: dict[str, Any], device: int | None, host: int | None
) -> tuple[Any, list[Problem]]:
    """Build the plan of `data`: (the plan or None, what building it found, the memory budgets'
    problems included)."""
    try:
        plan = registry.resolve(data)
    except SpecRegError as exc:
        return None, list(exc.problems)
    return plan, plan.memory().budget_problems(
        device_budget=device, host_budget=host, flags=BUDGET_FLAGS
    )


def build_in_child(
    config: dict[str, Any], *, device_budget: int | None = None, host_budget: int | None = None
) -> list[Problem]:
    """What building the plan of `config` finds, with the memory budgets' problems, built in
    a child process (see the module); SR157 when the child gives no answer."""
    request = {"config": config, "device_budget": device_budget, "host_budget": host_budget}
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in sys.path if p)  # this process's modules
    result = subprocess.run(
        [sys.executable, "-m", "specreg.cli.child_build"],
        input=json.dumps(request), capture_output=True, text=True, env=env,
    )
    answer = _answer(result.stdout) if result.returncode == 0 else None
    if answer is None:
        return [_no_answer(result.returncode, result.stderr)]
    try:
        return [Problem(**{k: p[k] for k in PROBLEM_FIELDS}) for p in answer["problems"]]
    except (KeyError, TypeError):
        return [_no_answer(result.returncode, f"an unreadable answer: {answer!r}")]


def _answer(stdout: str) -> Any:
    for line in reversed(stdout.splitlines()):
        if line.startswith(ANSWER):
            with contextlib.suppress(ValueError):
                return json.loads(line[len(ANSWER):])
    return None


def _no_answer(status: int, stderr: str) -> Problem:
    lines = [line.strip() for line in stderr.splitlines() if line.strip()]
    last = lines[-1] if lines else "no error output"
    return problem(
        "SR157",
        f"the child process that builds the plan's objects ended without an answer (exit "
        f"status {status}): {last}",
        accepted="a child process that builds the verifier, drafter and cache swapper and "
        "reports what it found",
        fix="run `specreg plan` with the same flags to see the full error, or pass "
        "--no-torch-build to check the config without building the objects that need torch",
        field="objects",
    )


def child_problems(request: dict[str, Any]) -> list[Problem]:
    """In the child: resolve the plan of `request["config"]` with the plugins this process
    loads, and check its memory budgets."""
    from specreg.registry.registry import Registry

    _, found = objects_problems(
        Registry.load(), request["config"], request.get("device_budget"),
        request.get("host_budget"),
    )
    return found


def main() -> int:
    request = json.loads(sys.stdin.read())
    with contextlib.redirect_stdout(sys.stderr):  # a plugin's prints stay out of the answer
        try:
            found = child_problems(request)
        except SpecRegError as exc:  # loading, say: reported as resolve reports it
            found = list(exc.problems)
    print(ANSWER + json.dumps({"problems": [p.to_dict() for p in found]}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
