"""The conformance kit's report: every clause checked, by family, each failure a coded problem.

A `Clause` is one statement of the plugin contract as the kit checked it, with the `Problem`
that failed it (a catalog code and one sentence with its fix) or None. `ConformanceReport`
collects them, says in one line how many passed per family (`summary()`, the first line of
`str(report)`), and raises `ConformanceError` naming every failed clause.
"""

from __future__ import annotations

import warnings

import attrs

from specreg.errors import Problem

#: The kit's clause families, in the order the summary lists them.
FAMILIES = ("configs", "widths", "protocols", "ranges", "candidates", "lossless", "cache")


class ConformanceNotice(UserWarning):
    """Something a passing report must not hide (SR151: the toy model drafted, not the plugin)."""


@attrs.frozen
class Clause:
    """One clause of the contract, as checked: its family, what it states, and the problem
    that failed it (None: it held)."""

    family: str = attrs.field(validator=attrs.validators.in_(FAMILIES))
    name: str
    problem: Problem | None = None

    @property
    def passed(self) -> bool:
        return self.problem is None

    def render(self) -> str:
        """The clause, and for a failure its coded problem: '<clause>: [SRxxx] ... Fix: ...'."""
        return self.name if self.problem is None else f"{self.name}: {self.problem.render()}"


@attrs.define
class ConformanceReport:
    """What the kit checked of one algorithm or cache (`subject`), clause by clause."""

    subject: str
    clauses: list[Clause] = attrs.field(factory=list)
    notices: list[str] = attrs.field(factory=list)

    def record(self, family: str, name: str, problem: Problem | None = None) -> None:
        """One clause checked: held when `problem` is None, else failed by it."""
        self.clauses.append(Clause(family, name, problem))

    def notice(self, found: Problem | None) -> None:
        """Record a notice once, and warn with it so a passing pytest run shows it too."""
        if found is not None and found.render() not in self.notices:
            self.notices.append(found.render())
            warnings.warn(ConformanceNotice(f"{self.subject}: {found.render()}"), stacklevel=3)

    @property
    def checked(self) -> list[str]:
        """Every clause checked, by name."""
        return [c.name for c in self.clauses]

    @property
    def failed(self) -> list[Clause]:
        return [c for c in self.clauses if not c.passed]

    @property
    def failures(self) -> list[str]:
        """Every failed clause with its coded problem, one line each."""
        return [c.render() for c in self.failed]

    def summary(self) -> str:
        """One line: how many clauses held, overall and per family."""
        held = len(self.clauses) - len(self.failed)
        families = [
            f"{family} {sum(c.passed for c in found)}/{len(found)}"
            for family in FAMILIES
            if (found := [c for c in self.clauses if c.family == family])
        ]
        verdict = "passes" if not self.failed else f"fails {len(self.failed)} clause(s)"
        return (f"{self.subject} {verdict}: {held} of {len(self.clauses)} clauses held "
                f"({', '.join(families) or 'none checked'})")

    def __str__(self) -> str:
        lines = [self.summary()]
        lines += [f"  - [{c.family}] {c.render()}" for c in self.failed]
        lines += [f"  notice: {n}" for n in self.notices]
        return "\n".join(lines)

    def raise_if_failed(self) -> ConformanceReport:
        if self.failed:
            raise ConformanceError(self)
        return self


class ConformanceError(AssertionError):
    """Some clauses of the plugin contract failed: the message is the report (its summary,
    then every failed clause with its code); `failures` and `report` hold them."""

    def __init__(self, report: ConformanceReport) -> None:
        self.report = report
        self.failures = report.failures
        super().__init__(str(report))

    @property
    def clauses(self) -> list[str]:
        """The names of the failed clauses."""
        return [c.name for c in self.report.failed]
