"""Closest-name suggestions for error messages."""

from __future__ import annotations

import difflib
from collections.abc import Iterable
from typing import Any

from specreg.errors import Problem, problem


def closest(name: str, choices: Iterable[str]) -> str | None:
    """The choice closest to `name`, or None when nothing is close."""
    options = list(choices)
    matches = difflib.get_close_matches(name.lower(), options, n=1, cutoff=0.5)
    return matches[0] if matches else None


def did_you_mean(name: str, choices: Iterable[str]) -> str:
    match = closest(name, choices)
    return f" Did you mean {match!r}?" if match else ""


#: SGLang's --speculative-algorithm value for "speculative decoding off".
OFF_VALUES = frozenset({"none", "off"})
_FLAGS = {"algorithm": "--speculative-algorithm", "cache": "--kv-cache"}
#: SGLang's own flags for a cache, where it has them (`--kv-cache` is specreg's alias).
_REAL_CACHE_FLAGS = {"hisparse": "--enable-hisparse --disable-radix-cache"}
_ARTICLE = {"algorithm": "a speculative algorithm", "cache": "a KV-cache backend"}


def unknown_name_problem(
    registry: Any, name: str, kind: str, *, flag: str | None = None
) -> Problem:
    """The coded answer to an algorithm or cache name no loaded plugin registered.

    In order of likelihood: SGLang's NONE (speculative decoding off), a name of the other kind
    (a cache passed as an algorithm), a plugin that failed to load (SR140), a misspelling (SR101
    or SR102 with the closest name). `flag` is the flag the user typed the name with.
    """
    key = str(name).strip().lower()
    flag = flag or _FLAGS[kind]
    other = "cache" if kind == "algorithm" else "algorithm"
    own_specs = registry.algorithms() if kind == "algorithm" else registry.caches()
    other_specs = registry.caches() if kind == "algorithm" else registry.algorithms()
    choices = sorted({n for spec in own_specs for n in spec.names})
    accepted = ", ".join(choices) or f"none: no plugin registered any {kind}"
    if kind == "algorithm" and key in OFF_VALUES:
        return problem(
            "SR146",
            f"{name!r} turns speculative decoding off in SGLang; specreg only configures "
            "speculative decoding, so there is nothing to resolve",
            accepted=accepted,
            fix=f"drop {flag} (and the other speculative flags) to serve without "
            f"speculative decoding, or pass an algorithm such as {flag} {choices[0] if choices else 'eagle'}",
            field=kind,
        )
    if any(key in spec.names for spec in other_specs):
        real = _REAL_CACHE_FLAGS.get(key) if kind == "algorithm" else None
        right = real or _FLAGS[other]
        with_flag = real or f"{right} {key}"
        how = f"turn {key} on with {real}" if real else f"pass {key} with {right}"
        algorithm = "eagle" if "eagle" in choices or not choices else choices[0]
        example = (
            f"{_FLAGS['algorithm']} {algorithm} {with_flag}"
            if kind == "algorithm"
            else with_flag
        )
        return problem(
            "SR146",
            f"{name!r} is {_ARTICLE[other]}, not {_ARTICLE[kind]}",
            accepted=accepted,
            fix=f"{how}, e.g. {example}",
            field=kind,
        )
    failed = [f for f in registry.failures if f.plugin]
    if failed:
        causes = "; ".join(f"{f.plugin!r} ({f.problem.code})" for f in failed)
        return problem(
            "SR140",
            f"unknown {kind} {name!r}, and {len(failed)} plugin(s) failed to load: {causes}. "
            f"A plugin that failed to load most likely provides {name!r}",
            accepted=accepted,
            fix="fix the plugin that failed to load (`specreg list` shows why it failed), "
            f"then pass {name!r} to {flag} again",
            field=kind,
        )
    return problem(
        "SR101" if kind == "algorithm" else "SR102",
        f"unknown {kind} {name!r}.{did_you_mean(key, choices)}",
        accepted=accepted,
        fix=f"pass one of them to {flag}, or install the plugin that provides {name!r}",
        field=kind,
    )


def unmatched_allowlist_problem(name: str, available: Iterable[str], group: str) -> Problem:
    """SR141: a SPECREG_PLUGINS entry that matches no installed entry point."""
    names = sorted(available)
    return problem(
        "SR141",
        f"SPECREG_PLUGINS names {name!r}, which matches no installed entry point of group "
        f"{group!r}.{did_you_mean(name, names)}",
        accepted=", ".join(names) or "no plugin is installed",
        fix=f"remove {name!r} from SPECREG_PLUGINS, correct its spelling, or install the "
        "distribution that provides it",
        field="SPECREG_PLUGINS",
    )
