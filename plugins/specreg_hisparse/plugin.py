"""The HiSparse plugin: registers the `hisparse` KV-cache backend, validates its layout against
the plan, and builds the swapper; registers its SGLang runtime substitution (`hisparse_swap`,
`specreg_hisparse.sglang_seam`). Imports neither torch nor triton at module level."""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from specreg.hookspecs import hookimpl
from specreg.contract.phase import Phase
from specreg.contract.specs import CacheSpec
from specreg_hisparse.sizes import DEFAULT_OPTIONS, layout_from_options

if TYPE_CHECKING:
    from specreg.contract.config import SpecConfig
    from specreg.errors import Problem
    from specreg.contract.resolution import Resolution
    from specreg.contract.specs import AlgorithmSpec

CACHE_NAME = "hisparse"


@hookimpl
def specreg_register_caches(register: Callable[..., None]) -> None:
    register(
        CacheSpec(
            name=CACHE_NAME,
            description=(
                "Sparse-attention KV cache: full KV in host memory, a per-request device hot "
                "buffer (LRU) plus tail page; one swap resolves every verify step together, "
                "deduplicating misses across steps."
            ),
            options=dict(DEFAULT_OPTIONS),
        )
    )


def _verify_width(resolution: Resolution | None) -> int | None:
    if resolution is None:
        return None
    return int(resolution.target[Phase.TARGET_VERIFY])


@hookimpl
def specreg_validate_config(
    config: SpecConfig,
    algorithm: AlgorithmSpec,
    cache: CacheSpec | None,
    resolution: Resolution | None,
) -> list[Problem]:
    if cache is None or cache.name != CACHE_NAME:
        return []
    known = {k: v for k, v in config.cache_options.items() if k in DEFAULT_OPTIONS}
    _, problems = layout_from_options(known, _verify_width(resolution))
    return problems


@hookimpl
def specreg_make_cache_swapper(
    config: SpecConfig, cache: CacheSpec, resolution: Resolution
) -> Any | None:
    if cache.name != CACHE_NAME:
        return None
    layout, problems = layout_from_options(dict(config.cache_options), _verify_width(resolution))
    if layout is None:  # validation already reported these; keep the error coded regardless
        from specreg.errors import ConfigError

        raise ConfigError(problems)
    from specreg_hisparse.swapper import HiSparseSwapper

    return HiSparseSwapper(layout)


@hookimpl
def specreg_register_errors(register: Callable[..., None]) -> None:
    from specreg_hisparse.errors import ENTRIES

    for entry in ENTRIES:
        register(entry)


@hookimpl
def specreg_register_substitutions(register: Callable[..., None]) -> None:
    from specreg_hisparse.sglang_seam import SUBSTITUTION

    register(SUBSTITUTION)
