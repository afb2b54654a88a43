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
    from specreg.contract.config import SpecConfig
    from specreg.errors import Problem
    from specreg.contract.phase import Phase
    from specreg.contract.resolution import Resolution, Sizes
    from specreg.contract.specs import AlgorithmSpec, CacheSpec

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
    lie in SR500-SR899 and belong to the first plugin that registers them. The entries live in
    that registry's ``registry.catalog``, which ``specreg explain`` prints like the built-in
    entries. A code out of range or taken is SR119.

    :param register: ``register(entry: ErrorEntry) -> None``.
    :returns: nothing.
    """


@hookspec
def specreg_register_substitutions(register: Callable[..., None]) -> None:
    """Register the runtime substitutions this plugin provides: framework seams where the
    plugin's code runs in place of the framework's own.

    Called once per plugin while the registry loads, after the error entries. Call
    ``register(specreg.contract.substitutions.Substitution(name, framework, summary,
    installer))`` once per substitution: ``framework`` is ``"sglang"`` or ``"vllm"``, and
    ``installer(plan)`` (a callable, or a ``"module:function"`` string imported only when it
    runs) installs and checks the seam inside the framework's process when the adapter's
    switch (``SPECREG_SGLANG_SUBSTITUTE`` / ``SPECREG_VLLM_SUBSTITUTE``) names it; a config's
    ``substitutions`` field accepts the same names. The registry keeps them as plain data,
    ``registry.substitutions()``; a malformed substitution, or a name another plugin
    registered first, is SR129 and the plugin is skipped.

    :param register: ``register(substitution: Substitution) -> None``.
    :returns: nothing.
    """


# -------------------------------------------------------------------------------------------------
# Configuration hooks: called by registry.resolve(config), in this order.
# -------------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def specreg_resolve_config(
    config: SpecConfig, algorithm: AlgorithmSpec, memo: dict[str, Any]
) -> SpecConfig | None:
    """Fill in every parameter the user left unset.

    Called once per resolve, first, with the user's config, for the algorithm it names. Return
    a copy of ``config`` whose ``num_steps``, ``topk`` and ``num_draft_tokens`` are all set, for
    example inferring ``num_draft_tokens = num_steps + 1`` for a chain. Never raise for values
    that are merely out of range: ``specreg_validate_config`` reports those. The default plugin
    fills from the ``AlgorithmSpec`` defaults.

    :param memo: a dict that lives for this one resolve and is passed to every later hook: keep
        what you derived (a parsed draft config, say) under a key of your own to reuse it.
    :returns: the resolved ``SpecConfig``, or None for algorithms this plugin does not own.
    """


@hookspec(firstresult=True)
def specreg_resolve_candidates(
    config: SpecConfig, algorithm: AlgorithmSpec, memo: dict[str, Any]
) -> Sequence[SpecConfig] | None:
    """Derive the config of every adaptive candidate step count.

    Called once per resolve, only when ``config.candidate_steps`` is set, with the resolved
    config. Return one resolved ``SpecConfig`` per positive entry of
    ``specreg.contract.resolution.adaptive_steps(config)``, in that order (step 0 means speculation
    off and has no config). The default plugin derives a chain (``num_steps = s``,
    ``num_draft_tokens = s + 1``), and for a tree keeps ``topk`` with
    ``num_draft_tokens = 1 + s * topk``; a plugin whose algorithm sizes differently answers
    for it. ``specreg_validate_config`` then sees every candidate in ``resolution.candidates``.

    :returns: the candidates' configs, or None for algorithms this plugin does not own.
    """


@hookspec(firstresult=True)
def specreg_resolve_sizes(
    configs: Sequence[SpecConfig], algorithm: AlgorithmSpec, memo: dict[str, Any]
) -> Sequence[Sizes] | None:
    """Return gamma and every phase's per-request width, for each config in ``configs``.

    Called once per resolve with the resolved config followed by every adaptive candidate's.
    Return one ``specreg.Sizes`` per config, in order: ``gamma`` (drafts proposed and verified
    per step) and the width of each phase on the target and the draft worker. The plan keeps
    the answers and their maxima, so a serving loop never calls a hook. Defaults: gamma =
    num_draft_tokens - 1; ``draft_decode`` = topk, ``draft_extend`` = ``target_verify`` =
    num_draft_tokens, on both workers.

    :returns: one ``Sizes`` per config, or None for algorithms this plugin does not own.
    """


@hookspec(firstresult=True)
def specreg_resolve_gamma(config: SpecConfig, algorithm: AlgorithmSpec) -> int | None:
    """Override gamma for one config (a per-config form of ``specreg_resolve_sizes``).

    Called for the resolved config and each candidate, only when some plugin implements it;
    an answer replaces the gamma ``specreg_resolve_sizes`` gave. Prefer
    ``specreg_resolve_sizes``, which answers for every config in one call.

    :returns: an int >= 0, or None to keep the sizes hook's answer.
    """


@hookspec(firstresult=True)
def specreg_num_tokens_per_req(
    config: SpecConfig, algorithm: AlgorithmSpec, phase: Phase, is_draft_worker: bool
) -> int | None:
    """Override one phase's width for one config (a per-config form of
    ``specreg_resolve_sizes``).

    Called for every phase, worker and config, only when some plugin implements it; an
    answer replaces the width ``specreg_resolve_sizes`` gave. Prefer
    ``specreg_resolve_sizes``.

    :param phase: a ``specreg.Phase``.
    :param is_draft_worker: True for the draft model's worker.
    :returns: an int >= 0, or None to keep the sizes hook's answer.
    """


@hookspec
def specreg_validate_config(
    config: SpecConfig,
    algorithm: AlgorithmSpec,
    cache: CacheSpec | None,
    resolution: Resolution | None,
    memo: dict[str, Any],
) -> Sequence[Problem] | None:
    """Report every problem with a config, without raising.

    Called by ``registry.resolve`` and ``registry.check`` after the resolution hooks, for
    every plugin: a collecting hook, and ``registry.resolve`` raises one
    ``ConfigError`` listing the problems of all of them. Problems with ``severity="warning"``
    are notices: they are kept in ``plan.notices`` and do not fail the config.

    :param config: the config exactly as the user gave it (unset fields are None).
    :param algorithm: the algorithm the config names.
    :param cache: the cache backend the config names, or None.
    :param resolution: the resolved config, its adaptive candidates, gamma and widths, or None
        when resolving failed. Report a candidate your algorithm cannot serve here.
    :param memo: the dict the resolution hooks of this resolve saw.
    :returns: a list of ``specreg.Problem`` (empty or None when all is well).
    """


# -------------------------------------------------------------------------------------------------
# Kernel hooks: build the objects that run a plugin's kernels. Called once per resolve.
# -------------------------------------------------------------------------------------------------


@hookspec(firstresult=True)
def specreg_make_verifier(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution, memo: dict[str, Any]
) -> Any | None:
    """Return the verifier that runs this algorithm's verification kernels.

    Called once per resolve, after validation passed, with the resolved config. Size it for
    ``resolution`` (the maxima over adaptive candidates) and accept every candidate's width.
    The object is stored as ``plan.verifier`` and must satisfy
    ``specreg.contract.protocols.ChainVerifierProtocol`` (chain and block drafting) or
    ``TreeVerifierProtocol`` (tree drafting), returning ``VerifyResult``; otherwise resolve
    fails with SR123 naming the plugin. The default plugin returns specreg's chain verifier
    for chain and block drafters.

    :returns: the verifier, or None for algorithms this plugin does not own.
    """


@hookspec(firstresult=True)
def specreg_make_drafter(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution, memo: dict[str, Any]
) -> Any | None:
    """Return the object that turns draft outputs into proposals: ``plan.drafter``.

    Called once per resolve, after validation passed, with the resolved config; size it for
    ``resolution``. It must satisfy the protocol of the algorithm's drafting style
    (``specreg.contract.protocols``): ``ChainDrafterProtocol`` (model-free chains such as n-gram:
    ``propose(history [b, L], lengths [b]) -> [b, gamma]``), ``TreeDrafterProtocol`` (a draft
    step from the draft model's logits and hidden states, and tree assembly) or
    ``BlockDrafterProtocol`` (a draft block and its proposal); otherwise resolve fails with
    SR123 naming the plugin. None means the algorithm has no drafter.

    :returns: the drafter, or None.
    """


@hookspec(firstresult=True)
def specreg_make_cache_swapper(
    config: SpecConfig, cache: CacheSpec, resolution: Resolution, memo: dict[str, Any]
) -> Any | None:
    """Return the object that swaps KV rows for this cache backend.

    Called once per resolve when the config names a cache, after validation passed. The object
    is stored as ``plan.cache_swapper`` and must satisfy
    ``specreg.contract.protocols.CacheSwapperProtocol`` (else SR123 naming the plugin).

    :param resolution: the resolved widths (maxima over adaptive candidates); a swap resolves
        ``target_verify`` steps per call.
    :returns: the swapper, or None for caches this plugin does not own.
    """
