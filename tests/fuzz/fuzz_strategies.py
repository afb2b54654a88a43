"""Shared hypothesis strategies and the rule every fuzz target checks."""

from __future__ import annotations

import math
from collections.abc import Callable
from typing import Any

from hypothesis import strategies as st

from specreg.errors import SpecRegError

#: Scalars of every JSON type plus the awkward Python ones a caller may pass by mistake.
scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(2**70), 2**70),
    st.integers(-3, 40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([math.nan, math.inf, -0.0, 1.5]),
    st.text(max_size=12),
    st.sampled_from(["eagle", "EAGLE3", " Eagle ", "dspark", "dflash", "ngram", "hisparse", "", "-1"]),
    st.binary(max_size=4),
    st.builds(object),
    st.frozensets(st.integers(0, 4), max_size=3),
)


def junk(leaves: st.SearchStrategy = scalars) -> st.SearchStrategy:
    """Nested lists, tuples and dicts of `leaves`."""
    return st.recursive(
        leaves,
        lambda inner: st.one_of(
            st.lists(inner, max_size=4),
            st.tuples(inner, inner),
            st.dictionaries(st.one_of(st.text(max_size=6), st.integers(-2, 2)), inner, max_size=4),
        ),
        max_leaves=12,
    )


def coded_or_result(call: Callable[[], Any]) -> tuple[Any, SpecRegError | None]:
    """Run `call`: a result, or a coded SpecRegError. Any other exception propagates (a bug)."""
    try:
        return call(), None
    except SpecRegError as exc:
        assert exc.problems and all(p.code.startswith("SR") for p in exc.problems), exc
        return None, exc
