"""specreg's default plugin: the generic rules, registered `trylast` so any plugin overrides them.

- resolve_config: unset parameters take the AlgorithmSpec defaults; a chain (topk 1) infers
  the one of num_steps and num_draft_tokens not given from the other (num_draft_tokens =
  num_steps + 1), as its adaptive candidates do, so no given number is ignored.
- candidates: step s drafts a chain (num_steps = s, num_draft_tokens = s + 1); a tree keeps topk
  with num_draft_tokens = 1 + s * topk.
- sizes: gamma = num_draft_tokens - 1; draft_decode = topk, draft_extend = target_verify =
  num_draft_tokens on both workers.
- validation: every parameter, and every candidate's, within the ranges the AlgorithmSpec
  declares; cache options known; the acceptance rule's gamma-dependent ranges, and SR191 naming
  a lossy rule.
- verifier: the core chain verifier for chain and block drafters, accepting every candidate's
  width.
- substitutions: the core adapters' own runtime substitutions, `tree_verify` (SGLang) and
  `rejection_sampler` (vLLM), registered before any plugin's (a plugin's own, such as
  HiSparse's `hisparse_swap`, come through the same hook).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from specreg.errors import Problem, problem
from specreg.hookspecs import hookimpl
from specreg.contract.phase import Phase
from specreg.contract.resolution import Sizes, adaptive_steps
from specreg.contract.substitutions import Substitution

if TYPE_CHECKING:
    from specreg.contract.config import SpecConfig
    from specreg.contract.resolution import Resolution
    from specreg.contract.specs import AlgorithmSpec, CacheSpec

PLUGIN_NAME = "specreg.default"
_PARAMS = ("num_steps", "topk", "num_draft_tokens")
_FLAGS = {
    "num_steps": "--speculative-num-steps",
    "topk": "--speculative-eagle-topk",
    "num_draft_tokens": "--speculative-num-draft-tokens",
}


#: The core adapters' runtime substitutions; their installers (in `specreg.adapters`) are
#: imported only inside the framework's process.
SUBSTITUTIONS = (
    Substitution(
        "tree_verify", "sglang",
        "eagle_sample's greedy and sampling tree kernels (and the top-k/top-p renorm before "
        "them) are specreg's: min-p and per-request seeds added, and greedy verification runs "
        "on every platform",
        "specreg.adapters.sglang_tree_verify:install",
    ),
    Substitution(
        "rejection_sampler", "vllm",
        "vLLM's rejection sampler runs specreg's chain verifier: min_p and logit_bias are "
        "accepted with speculative decoding and applied at every verified position",
        "specreg.adapters.vllm_rejection:install",
    ),
)


@hookimpl
def specreg_register_substitutions(register: Callable[..., None]) -> None:
    for substitution in SUBSTITUTIONS:
        register(substitution)


@hookimpl(trylast=True)
def specreg_resolve_config(config: SpecConfig, algorithm: AlgorithmSpec) -> SpecConfig:
    given = {name: getattr(config, name) for name in _PARAMS}
    values = _chain_inferred(dict(given), algorithm)  # from what the user gave
    for name in ("num_draft_tokens", "num_steps", "topk"):  # a chain's steps follow its width
        if values[name] is None:
            values[name] = getattr(algorithm, name).default
            values = _chain_inferred(values, algorithm)
    changes = {name: v for name, v in values.items() if v != given[name]}
    return config.evolve(**changes) if changes else config


def _chain_inferred(values: dict[str, int | None], algorithm: AlgorithmSpec) -> dict[str, int | None]:
    """For a chain (topk 1), the one of num_steps and num_draft_tokens that is None, from the
    other: a chain of s drafts is verified with s + 1 tokens."""
    if algorithm.drafting != "chain" or (values["topk"] or 1) != 1:
        return values
    steps, drafts = values["num_steps"], values["num_draft_tokens"]
    if drafts is None and steps is not None:
        return {**values, "num_draft_tokens": steps + 1}
    if steps is None and drafts is not None:
        return {**values, "num_steps": drafts - 1}
    return values


def derive_candidate(config: SpecConfig, steps: int) -> SpecConfig:
    """The default candidate for `steps`: a chain of `steps` drafts, or for a tree (topk > 1)
    `topk` branches per level with 1 + steps * topk verified nodes."""
    topk = config.topk or 1
    draft_tokens = steps + 1 if topk == 1 else 1 + steps * topk
    return config.evolve(num_steps=steps, num_draft_tokens=draft_tokens, candidate_steps=None)


@hookimpl(trylast=True)
def specreg_resolve_candidates(config: SpecConfig) -> list[SpecConfig]:
    return [derive_candidate(config, s) for s in adaptive_steps(config)]


def default_sizes(config: SpecConfig) -> Sizes:
    """gamma = num_draft_tokens - 1; draft_decode = topk; draft_extend = target_verify =
    num_draft_tokens; the same on both workers."""
    n = config.num_draft_tokens or 0
    widths = {
        Phase.DRAFT_DECODE: config.topk or 0,
        Phase.DRAFT_EXTEND: n,
        Phase.TARGET_VERIFY: n,
    }
    return Sizes.same_on_both(max(n - 1, 0), widths)


@hookimpl(trylast=True)
def specreg_resolve_sizes(configs: Sequence[SpecConfig]) -> list[Sizes]:
    return [default_sizes(c) for c in configs]


@hookimpl(trylast=True)
def specreg_validate_config(
    config: SpecConfig,
    algorithm: AlgorithmSpec,
    cache: CacheSpec | None,
    resolution: Resolution | None,
) -> list[Problem]:
    problems = _range_problems(config, algorithm, resolution)
    if resolution is not None:
        for candidate in resolution.candidates:
            problems += _candidate_problems(candidate.steps, candidate.config, algorithm)
    if cache is not None:
        problems += _cache_option_problems(config, cache)
    return problems + _acceptance_problems(config, algorithm, resolution)


def _acceptance_problems(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution | None
) -> list[Problem]:
    """The acceptance rule's checks that need gamma (synthetic rates: one per draft position),
    SR198 for a chain rule on a tree of topk > 1, and SR191, the warning that names a lossy
    rule, for `specreg check` and the plan."""
    from specreg.contract.acceptance_rules import lossy_notice

    rule = config.acceptance
    found = rule.problems(resolution.gamma) if resolution is not None else []
    topk = (resolution.config if resolution is not None else config).topk or 1
    if algorithm.drafting == "tree" and topk > 1 and rule.kind in ("typical", "synthetic"):
        found.append(problem(
            "SR198",
            f"{algorithm.name}: {rule.kind} acceptance is a chain rule, and topk={topk} drafts "
            "a tree",
            accepted="typical or synthetic acceptance with topk 1; relaxed thresholds with any "
            "topk",
            fix="set --speculative-eagle-topk 1, or use --speculative-accept-threshold-single / "
            "--speculative-accept-threshold-acc",
            field="acceptance",
        ))
    return found + ([] if any(p.is_error for p in found) else lossy_notice(rule))


def _candidate_problems(steps: int, config: SpecConfig, algorithm: AlgorithmSpec) -> list[Problem]:
    out = []
    for name in _PARAMS:
        value = getattr(config, name)
        allowed = getattr(algorithm, name)
        if value is not None and not allowed.contains(value):
            out.append(
                problem(
                    "SR122",
                    f"{algorithm.name} cannot serve adaptive candidate step {steps}: it needs "
                    f"{name}={value}, outside {allowed.describe()}",
                    accepted=f"candidate steps whose {name} lies in {allowed.describe()}",
                    fix=f"remove {steps} from the candidate steps "
                    "(--speculative-candidate-steps)",
                    field="candidate_steps",
                )
            )
    return out


def _range_problems(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution | None
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
    return problems


def _cache_option_problems(config: SpecConfig, cache: CacheSpec) -> list[Problem]:
    from specreg._suggest import did_you_mean

    problems = []
    for key in sorted(set(config.cache_options) - set(cache.options)):
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
def specreg_make_verifier(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution
) -> Any | None:
    if algorithm.drafting not in ("chain", "block") or config.num_draft_tokens is None:
        return None
    from specreg.step.chain_verifier import ChainVerifier

    widths = sorted({c.num_draft_tokens for c in resolution.configs() if c.num_draft_tokens})
    return ChainVerifier(
        num_draft_tokens=max(widths), widths=widths, filter_order=config.filter_order,
        acceptance=config.acceptance, verify_mode=config.verify_mode,
    )
