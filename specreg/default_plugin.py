"""specreg's default plugin: the generic rules, registered `trylast` so any plugin overrides them.

- resolve_config: unset parameters take the AlgorithmSpec defaults.
- gamma = num_draft_tokens - 1.
- widths: draft_decode = topk, draft_extend = num_draft_tokens, target_verify = num_draft_tokens.
- validation: every parameter within the ranges the AlgorithmSpec declares; cache options known.
- verifier: the core chain verifier for chain and block drafters.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specreg.errors import Problem, problem
from specreg.hookspecs import hookimpl
from specreg.phase import Phase

if TYPE_CHECKING:
    from specreg.config import SpecConfig
    from specreg.resolution import Resolution
    from specreg.specs import AlgorithmSpec, CacheSpec

PLUGIN_NAME = "specreg.default"
_PARAMS = ("num_steps", "topk", "num_draft_tokens")
_FLAGS = {
    "num_steps": "--speculative-num-steps",
    "topk": "--speculative-eagle-topk",
    "num_draft_tokens": "--speculative-num-draft-tokens",
}


@hookimpl(trylast=True)
def specreg_resolve_config(config: SpecConfig, algorithm: AlgorithmSpec) -> SpecConfig:
    changes = {}
    for name in _PARAMS:
        if getattr(config, name) is None:
            changes[name] = getattr(algorithm, name).default
    return config.evolve(**changes) if changes else config


@hookimpl(trylast=True)
def specreg_resolve_gamma(config: SpecConfig) -> int | None:
    if config.num_draft_tokens is None:
        return None
    return config.num_draft_tokens - 1


@hookimpl(trylast=True)
def specreg_num_tokens_per_req(config: SpecConfig, phase: Phase) -> int | None:
    if phase is Phase.DRAFT_DECODE:
        return config.topk
    return config.num_draft_tokens


@hookimpl(trylast=True)
def specreg_validate_config(
    config: SpecConfig,
    algorithm: AlgorithmSpec,
    cache: CacheSpec | None,
    resolution: Resolution | None,
) -> list[Problem]:
    problems = []
    effective = resolution.config if resolution is not None else config
    given_out_of_range = _given_out_of_range(config, algorithm)
    for name in _PARAMS:
        value = getattr(effective, name)
        allowed = getattr(algorithm, name)
        if value is None:
            if allowed.default is None and getattr(config, name) is None:
                problems.append(
                    problem(
                        "SR103",
                        f"{algorithm.name} needs {name} and it could not be inferred",
                        accepted=f"an integer in {allowed.describe()}",
                        fix=f"set {_FLAGS[name]}",
                        field=name,
                    )
                )
            continue
        if not allowed.contains(value):
            source = "given" if getattr(config, name) is not None else "inferred"
            if source == "inferred" and given_out_of_range:
                continue  # inferred from a given value already reported: one cause, one error
            problems.append(
                problem(
                    "SR103",
                    f"{algorithm.name}: {name}={value} ({source}) is out of range",
                    accepted=f"{name} in {allowed.describe()}",
                    fix=f"set {_FLAGS[name]} within {allowed.describe()}",
                    field=name,
                )
            )
    if cache is not None:
        unknown = sorted(set(config.cache_options) - set(cache.options))
        for key in unknown:
            from specreg._suggest import did_you_mean

            problems.append(
                problem(
                    "SR108",
                    f"cache {cache.name!r} has no option {key!r}.{did_you_mean(key, cache.options)}",
                    accepted=", ".join(sorted(cache.options)) or "no options",
                    fix="rename or remove the option",
                    field=f"cache_options.{key}",
                )
            )
    return problems


def _given_out_of_range(config: SpecConfig, algorithm: AlgorithmSpec) -> bool:
    """Whether a value the user gave is outside its declared range."""
    return any(
        getattr(config, name) is not None and not getattr(algorithm, name).contains(
            getattr(config, name)
        )
        for name in _PARAMS
    )


@hookimpl(trylast=True)
def specreg_make_verifier(config: SpecConfig, algorithm: AlgorithmSpec) -> Any | None:
    if algorithm.drafting not in ("chain", "block") or config.num_draft_tokens is None:
        return None
    from specreg.kernels.chain import ChainVerifier

    return ChainVerifier(num_draft_tokens=config.num_draft_tokens)
