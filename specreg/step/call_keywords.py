"""Refuses a keyword a verifier's or drafter's public method does not take with a coded error
(SR930) that lists the keywords it does take, instead of Python's uncoded `TypeError`.

`@checked_keywords` wraps a method whose signature names every keyword it takes (no
`**kwargs`): `help()`, `inspect.signature` and IDEs show that signature, and a call with any
other keyword raises `UnknownKeywordError` (SR930, also a `TypeError`) naming the class, the
method, the closest accepted keyword and all of them. Keywords named in `refused` stay in the
signature (the method refuses them itself, with its own code) but are neither suggested nor
listed. The check is one set comparison per call. Imports neither torch nor triton.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterable
from typing import Any, ParamSpec, TypeVar, overload

from specreg._suggest import closest
from specreg.errors import UnknownKeywordError, problem

P = ParamSpec("P")
R = TypeVar("R")

_BY_NAME = (inspect.Parameter.POSITIONAL_OR_KEYWORD, inspect.Parameter.KEYWORD_ONLY)
CODE = "SR930"
#: Keywords other libraries use for what these methods take under another name.
KNOWN_ELSEWHERE = {"seed": "keys", "seeds": "keys"}


def keyword_names(method: Callable[..., Any]) -> tuple[str, ...]:
    """The names `method` takes by keyword, in signature order (`self` aside)."""
    params = inspect.signature(method).parameters.values()
    return tuple(p.name for p in params if p.kind in _BY_NAME and p.name != "self")


def unknown_keyword_error(
    owner: str, unknown: Iterable[str], accepted: Iterable[str]
) -> UnknownKeywordError:
    """SR930 for each keyword in `unknown` that `owner` (e.g. 'ChainVerifier.verify_sampling')
    does not take; `accepted` lists the keywords it does take."""
    shown = list(accepted)
    listing = ", ".join(shown)
    problems = []
    for name in unknown:
        match = KNOWN_ELSEWHERE.get(name) if KNOWN_ELSEWHERE.get(name) in shown else None
        match = match or closest(name, shown)
        fix = f"rename {name}= to {match}=" if match else (
            f"drop {name}=, or pass what it meant by one of the accepted keywords")
        if match == "keys" and name in KNOWN_ELSEWHERE:
            fix += " (a request's seed is its key, the key its draws are keyed by)"
        problems.append(problem(
            CODE, f"{owner}() does not take the keyword {name}=",
            accepted=f"{owner}() keywords: {listing}", fix=fix, field=name,
        ))
    return UnknownKeywordError(problems)


@overload
def checked_keywords(method: Callable[P, R]) -> Callable[P, R]: ...


@overload
def checked_keywords(
    *, refused: Iterable[str] = ()
) -> Callable[[Callable[P, R]], Callable[P, R]]: ...


def checked_keywords(method: Any = None, *, refused: Iterable[str] = ()) -> Any:
    """Decorate a method so that a keyword it does not take is SR930 (see the module).
    `refused`: keywords of the signature the method refuses itself, kept out of suggestions."""
    hidden = frozenset(refused)

    def decorate(func: Callable[P, R]) -> Callable[P, R]:
        names = keyword_names(func)
        taken = frozenset(names)
        shown = tuple(n for n in names if n not in hidden)

        @functools.wraps(func)
        def checked(*args: P.args, **kwargs: P.kwargs) -> R:
            if not taken.issuperset(kwargs):
                owner = f"{type(args[0]).__name__}.{func.__name__}" if args else func.__qualname__
                raise unknown_keyword_error(owner, [k for k in kwargs if k not in taken], shown)
            return func(*args, **kwargs)

        return checked

    return decorate if method is None else decorate(method)


def given_keywords(**values: Any) -> dict[str, Any]:
    """The keywords whose value is not None: what a typed method forwards, so the function it
    calls sees exactly the keywords its caller gave and applies its own defaults to the rest."""
    return {name: value for name, value in values.items() if value is not None}


def refuse_without_params(owner: str, params: object, **values: Any) -> None:
    """SR930 for `token_bitmask=`, `penalties=` or `seed=` given to `owner` without `params=`:
    the grammar mask and the penalties are applied by the per-request filtering that `params`
    runs, and a request's seed is its key (`keys=`) or `params.seed`."""
    if params is not None:
        return
    problems = []
    for name in (n for n, v in values.items() if v is not None):
        if name == "seed":
            problems.append(problem(
                CODE, f"{owner}() does not take seed=: a request's draws are keyed by its key",
                accepted="keys= [b] (each request's seed, or a key drawn once for it), or "
                "params=SamplingParams.of(b, seed=[...])",
                fix="pass keys=torch.tensor(seeds) instead of seed=", field=name,
            ))
        else:
            problems.append(problem(
                CODE, f"{owner}() applies {name}= only with params= (the per-request filtering "
                "applies it)",
                accepted=f"{name}= beside params=SamplingParams",
                fix="pass params=SamplingParams.of(b, temperature=1.0) (the probabilities as "
                "given) with it",
                field=name,
            ))
    if problems:
        raise UnknownKeywordError(problems)
