"""The conformance kit's cache contract: a cache resolves with an algorithm, and nothing is lost end to end.

`check_cache(registry, name)` resolves the cache beside an algorithm, checks the swapper
against `CacheSwapperProtocol`, generates greedily through it (every wrong or stale KV row
would change the output) and runs randomised swap calls that must lose no row; every failure is
a clause of the `cache` family with its code (`specreg.testing.conformance_report`).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import torch

from specreg.errors import SpecRegError, problem
from specreg.contract.protocols import CacheSwapperProtocol, missing_members
from specreg.registry.registry import Registry
from specreg.testing.conformance import missing_object
from specreg.testing.conformance_lossless import generation_clause
from specreg.testing.conformance_report import ConformanceReport
from specreg.testing.lossless import check_greedy
from specreg.testing.toy_model import ToyConfig, ToyLM


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
        for found in exc.problems:
            report.record("cache", f"resolves with {config}", found)
        return report.raise_if_failed()
    report.record("cache", f"resolves with {config}")
    swapper = plan.cache_swapper
    report.record("cache", "builds a swapper", None if swapper is not None else missing_object(
        cache.name, "cache_swapper", "cache", CacheSwapperProtocol))
    if swapper is None:
        return report.raise_if_failed()
    missing = missing_members(swapper, CacheSwapperProtocol)
    report.record("cache", "the swapper satisfies CacheSwapperProtocol", missing and problem(
        "SR123", f"the swapper {type(swapper).__name__} of {cache.name!r} breaks "
        f"CacheSwapperProtocol: missing or mismatched {', '.join(missing)}",
        accepted="every member of specreg.contract.protocols.CacheSwapperProtocol",
        fix=f"give {type(swapper).__name__} the members listed",
    ) or None)
    toy = ToyConfig()
    target = ToyLM(toy, seed=seed)
    draft = target.perturbed(0.25, seed=seed + 1)
    prompts = torch.randint(0, toy.vocab_size - 1, (3, 24), generator=torch.Generator().manual_seed(seed))

    def greedy() -> str | None:
        checked = check_greedy(plan, target, draft, prompts, 24)
        return None if checked.passed else ("greedy output through the cache differs from plain "
                                            f"greedy decoding from column {checked.first_mismatch}")

    def nothing_lost() -> str | None:
        lost = swap_property_check(plan, target, calls=calls, seed=seed)
        return "; ".join(lost[:5]) if lost else None

    generation_clause(report, "greedy output through the cache equals plain greedy decoding",
                      plan, greedy, family="cache")
    generation_clause(report, "nothing lost over random swap calls", plan, nothing_lost,
                      family="cache")
    return report.raise_if_failed()


def _first_algorithm(registry: Registry, cache: str) -> dict[str, Any]:
    for algorithm in registry.algorithms():
        config = {"algorithm": algorithm.name, "cache": cache}
        if not registry.check(config):
            return {"algorithm": algorithm.name}
    return {"algorithm": registry.algorithms()[0].name} if registry.algorithms() else {}
