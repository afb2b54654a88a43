"""Hook specifications for specreg plugins.

A plugin is a module (or object) with functions marked `@specreg.hookimpl`, named after the hooks
below. It ships as a distribution with an entry point in group `specreg`::

    [project.entry-points.specreg]
    myalgo = "myalgo_specreg.plugin"

Hooks are called at configuration time only (loading and `registry.resolve`). Nothing here is
called per step: a `SpecPlan` holds plain data and bound callables for the serving loop.

Every hook argument is optional for an implementation: take only the ones you need (pluggy passes
arguments by name). Implementations of the resolution hooks return None for algorithms or caches
they do not own, so the next plugin, and finally specreg's default plugin, answers.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

import pluggy

if TYPE_CHECKING:
    from specreg.config import SpecConfig
    from specreg.errors import Problem
    from specreg.phase import Phase
    from specreg.resolution import Resolution
    from specreg.specs import AlgorithmSpec, CacheSpec

PROJECT_NAME = "specreg"
hookspec = pluggy.HookspecMarker(PROJECT_NAME)
hookimpl = pluggy.HookimplMarker(PROJECT_NAME)


# -------------------------------------------------------------------------------------------------
# Registration hooks: called once per plugin when a registry loads.
# -------------------------------------------------------------------------------------------------


@hookspec
def specreg_register_algorithms(register: Callable[..., None]) -> None:
    """Register the speculative-decoding algorithms this plugin provides.

    Called once per plugin while the registry loads. Call
    ``register(AlgorithmSpec(...))`` once per algorithm; pass ``override=True`` to replace an
    algorithm of the same name registered by another plugin. A name (or alias) claimed by two
    plugins without an override is reported as SR112 naming both distributions.

    :param register: ``register(spec: AlgorithmSpec, *, override: bool = False) -> None``.
    :returns: nothing.
    """


@hookspec
def specreg_register_caches(register: Callable[..., None]) -> None:
    """Register the KV-cache backends this plugin provides.

    Called once per plugin while the registry loads. Call ``register(CacheSpec(...))`` once per
    backend, with the same override rules as algorithms.

    :param register: ``register(spec: CacheSpec, *, override: bool = False) -> None``.
    :returns: nothing.
    """


@hookspec
def specreg_register_errors(register: Callable[..., None]) -> None:
    """Register the error-catalog entries this plugin's own problems use.

    Called once per plugin while the registry loads, before anything can raise. Call
    ``register(specreg.catalog.ErrorEntry(code="SR5xx", ...))`` once per code; third-party codes
    lie in SR500-SR899 and belong to the first plugin that registers them. ``specreg explain``
    then prints them like the built-in entries. A code out of range or taken is SR119.

    :param register: ``register(entry: ErrorEntry) -> None``.
    :returns: nothing.
    """


# -------------------------------------------------------------------------------------------------
# Configuration hooks: called by registry.resolve(config), in this order.
# -------------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def specreg_resolve_config(config: SpecConfig, algorithm: AlgorithmSpec) -> SpecConfig | None:
    """Fill in every parameter the user left unset.

    Called first by ``registry.resolve``, with the user's config, for the algorithm it names (and
    once more per adaptive candidate step). Return a copy of ``config`` whose ``num_steps``,
    ``topk`` and ``num_draft_tokens`` are all set, for example inferring
    ``num_draft_tokens = num_steps + 1`` for a chain. Never raise for values that are merely out
    of range: ``specreg_validate_config`` reports those. The default plugin fills from the
    ``AlgorithmSpec`` defaults.

    :returns: the resolved ``SpecConfig``, or None for algorithms this plugin does not own.
    """


@hookspec(firstresult=True)
def specreg_resolve_gamma(config: SpecConfig, algorithm: AlgorithmSpec) -> int | None:
    """Return gamma, the number of draft tokens proposed (and verified) per step.

    Called once per resolve with the resolved config. The default is
    ``num_draft_tokens - 1``: the verify width counts the root (bonus) token besides the drafts.

    :returns: an int >= 0, or None for algorithms this plugin does not own.
    """


@hookspec(firstresult=True)
def specreg_num_tokens_per_req(
    config: SpecConfig, algorithm: AlgorithmSpec, phase: Phase, is_draft_worker: bool
) -> int | None:
    """Return the per-request token width of ``phase`` on the target or the draft worker.

    Called at resolve time for every phase and both workers (and every adaptive candidate); the
    plan stores the answers, so a serving loop never calls this hook. Defaults:
    ``draft_decode`` = topk, ``draft_extend`` = num_draft_tokens, ``target_verify`` =
    num_draft_tokens, for both workers. Override only what differs.

    :param phase: a ``specreg.Phase``.
    :param is_draft_worker: True for the draft model's worker.
    :returns: an int >= 0, or None for algorithms this plugin does not own.
    """


@hookspec
def specreg_validate_config(
    config: SpecConfig,
    algorithm: AlgorithmSpec,
    cache: CacheSpec | None,
    resolution: Resolution | None,
) -> Sequence[Problem] | None:
    """Report every problem with a config, without raising.

    Called by ``registry.resolve`` and ``registry.check`` after the resolution hooks, for
    every plugin: a collecting hook, and ``registry.resolve`` raises one
    ``ConfigError`` listing the problems of all of them. Problems with ``severity="warning"``
    are notices: they are kept in ``plan.notices`` and do not fail the config.

    :param config: the config exactly as the user gave it (unset fields are None).
    :param algorithm: the algorithm the config names.
    :param cache: the cache backend the config names, or None.
    :param resolution: the resolved config, gamma and widths, or None when resolving failed.
    :returns: a list of ``specreg.Problem`` (empty or None when all is well).
    """


# -------------------------------------------------------------------------------------------------
# Kernel hooks: build the objects that run a plugin's kernels. Called once per resolve.
# -------------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def specreg_make_verifier(config: SpecConfig, algorithm: AlgorithmSpec) -> Any | None:
    """Return the verifier that runs this algorithm's verification kernels.

    Called once per resolve, after validation passed, with the resolved config. The object is
    stored as ``plan.verifier``. The default plugin returns specreg's chain verifier for chain
    and block drafters.

    :returns: the verifier, or None for algorithms this plugin does not own.
    """


@hookspec(firstresult=True)
def specreg_make_drafter(config: SpecConfig, algorithm: AlgorithmSpec) -> Any | None:
    """Return the object that proposes draft tokens without a draft model, if the algorithm has one.

    Called once per resolve, after validation passed, with the resolved config. Model-free
    drafters (n-gram / prompt lookup) return an object with
    ``propose(history: LongTensor[b, L], lengths: LongTensor[b]) -> LongTensor[b, gamma]``;
    it is stored as ``plan.drafter``. Algorithms whose drafts come from a draft model the
    serving framework runs return None (the default).

    :returns: the drafter, or None.
    """


@hookspec(firstresult=True)
def specreg_make_cache_swapper(
    config: SpecConfig, cache: CacheSpec, resolution: Resolution
) -> Any | None:
    """Return the object that swaps KV rows for this cache backend.

    Called once per resolve when the config names a cache, after validation passed. The object
    is stored as ``plan.cache_swapper``.

    :param resolution: the resolved widths; a swap resolves ``target_verify`` steps per call.
    :returns: the swapper, or None for caches this plugin does not own.
    """
