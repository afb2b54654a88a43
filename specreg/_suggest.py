"""Closest-name suggestions for error messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The choice closest to `name`, or None when nothing is close."""
    options = list(choices)
    matches = difflib.get_close_matches(name.lower(), options, n=1, cutoff=0.5)
    return matches[0] if matches else None


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    match = closest(name, choices)
    return f" Did you mean {match!r}?" if match else ""
