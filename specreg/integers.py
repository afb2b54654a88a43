"""Integer-argument validation shared by configs, the CLI and kernel wrappers (torch-free).

Python's `bool` is an `int`; every integer argument in specreg rejects it, so `True` never passes
as a step count or a width.
"""

from __future__ import annotations

from typing import Any, TypeGuard

from specreg.errors import KernelInputError, Problem, problem


def is_int(value: Any) -> TypeGuard[int]:
    """True for an int that is not a bool (a type guard, so callers' checks narrow to int)."""
    return isinstance(value, int) and not isinstance(value, bool)


def int_range_text(low: int | None, high: int | None) -> str:
    """'an int >= 1', 'an int in [0, 8]', 'an int <= 5' or 'an int'."""
    if low is not None and high is not None:
        return f"an int in [{low}, {high}]"
    if low is not None:
        return f"an int >= {low}"
    if high is not None:
        return f"an int <= {high}"
    return "an int"


def int_problem(
    name: str,
    value: Any,
    *,
    code: str,
    low: int | None = None,
    high: int | None = None,
    fix: str | None = None,
    field: str | None = None,
) -> Problem | None:
    """The coded problem when `value` is not an int within [low, high], else None."""
    if is_int(value) and (low is None or value >= low) and (high is None or value <= high):
        return None
    accepted = int_range_text(low, high)
    return problem(
        code,
        f"{name}={value!r} is not {accepted}",
        accepted=accepted,
        fix=fix or f"pass {name} as {accepted}",
        field=field or name,
    )


def require_int(
    name: str,
    value: Any,
    *,
    low: int | None = None,
    high: int | None = None,
    code: str = "SR904",
    fix: str | None = None,
) -> int:
    """`value` when it is an int within [low, high]; a `KernelInputError` with `code` otherwise."""
    found = int_problem(name, value, code=code, low=low, high=high, fix=fix)
    if found is not None:
        raise KernelInputError(found)
    return value
