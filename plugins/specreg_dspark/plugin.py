"""The DSpark plugin's hooks (entry point ``dspark``): the `dspark` and `dflash` algorithms.

Torch-free at import: the verifier and drafter (torch) are imported when a plan builds them. Every
hook answers only for the algorithms ``dspark`` and ``dflash`` and returns None otherwise,
so specreg's default plugin (or another plugin) answers for the rest. The draft config is parsed
once per resolve and kept in the resolve's ``memo``; adaptive candidate step s verifies gamma = s
drafts of the same draft block (SR312 when the block holds fewer).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any

from specreg.errors import Problem, problem
from specreg.hookspecs import hookimpl
from specreg.contract.resolution import Sizes, adaptive_steps
from specreg.contract.specs import AlgorithmSpec, ParamRange
from specreg_dspark.checkpoint import parse_dflash_draft_config, parse_dspark_draft_config
from specreg_dspark.sizes import (
    DEFAULT_DFLASH_BLOCK_SIZE,
    DEFAULT_DSPARK_GAMMA,
    BlockRuntime,
    analyse_dflash,
    analyse_dspark,
    candidate_sizes,
    main_sizes,
    max_candidate_gamma,
)

if TYPE_CHECKING:
    from specreg.contract.config import SpecConfig
    from specreg.contract.resolution import Resolution
    from specreg.contract.specs import CacheSpec

_ONE = ParamRange(minimum=1, maximum=1, default=1)
# gamma <= 256: far above published block sizes (16), and it bounds every buffer.
MAX_NUM_DRAFT_TOKENS = 257

DSPARK_SPEC = AlgorithmSpec(
    name="dspark",
    drafting="block",
    verify_rules=("greedy", "chain_sampling"),
    description=(
        "DFlash block drafting plus a Markov head that corrects each slot's logits from the "
        "previous draft token; ragged (per-request) verify."
    ),
    uses_target_hidden_states=True,
    owns_draft_kv=True,
    supports_ragged_verify=True,
    num_steps=_ONE,
    topk=_ONE,
    num_draft_tokens=ParamRange(
        minimum=2, maximum=MAX_NUM_DRAFT_TOKENS, default=DEFAULT_DSPARK_GAMMA + 1
    ),
)
DFLASH_SPEC = AlgorithmSpec(
    name="dflash",
    drafting="block",
    verify_rules=("greedy", "chain_sampling"),
    description=(
        "Block-parallel drafting: one draft forward fills [anchor, MASK, ...] conditioned on "
        "target hidden states; the target verifies the first num_draft_tokens positions."
    ),
    uses_target_hidden_states=True,
    owns_draft_kv=True,
    supports_ragged_verify=False,
    num_steps=_ONE,
    topk=_ONE,
    num_draft_tokens=ParamRange(
        minimum=2, maximum=MAX_NUM_DRAFT_TOKENS, default=DEFAULT_DFLASH_BLOCK_SIZE
    ),
)
_FLAGS = {"topk": "--speculative-eagle-topk", "num_steps": "--speculative-num-steps"}


_ANALYSERS: dict[str, tuple[Callable[..., Any], Callable[..., Any]]] = {
    "dspark": (parse_dspark_draft_config, analyse_dspark),
    "dflash": (parse_dflash_draft_config, analyse_dflash),
}


def _analyse(
    config: SpecConfig, algorithm: AlgorithmSpec, memo: dict[str, Any] | None = None
) -> tuple[BlockRuntime, list[Problem]] | None:
    """The runtime and problems of `config`; the draft config is parsed once per `memo`."""
    found = _ANALYSERS.get(algorithm.name)
    if found is None:
        return None
    parse, analyse = found
    state = (memo if memo is not None else {}).setdefault(f"specreg_dspark.{algorithm.name}", {})
    n = config.num_draft_tokens
    by_n = state.setdefault("by_num_draft_tokens", {})
    if n not in by_n:
        if config.draft_config is not None and "parsed" not in state:
            state["parsed"] = parse(config.draft_config)
        by_n[n] = analyse(config.draft_config, n, parsed=state.get("parsed"))
    return by_n[n]  # type: ignore[no-any-return]


def runtime_for(
    config: SpecConfig, algorithm: AlgorithmSpec, memo: dict[str, Any] | None = None
) -> BlockRuntime | None:
    """The resolved runtime (gamma, widths, layout) of a dspark/dflash config, else None."""
    found = _analyse(config, algorithm, memo)
    return None if found is None else found[0]


@hookimpl
def specreg_register_algorithms(register: Callable[..., None]) -> None:
    register(DSPARK_SPEC)
    register(DFLASH_SPEC)


@hookimpl
def specreg_resolve_config(
    config: SpecConfig, algorithm: AlgorithmSpec, memo: dict[str, Any]
) -> SpecConfig | None:
    """topk and num_steps are 1 (a block drafter proposes one chain in one forward); n comes
    from the command line, else the checkpoint, else the default."""
    runtime = runtime_for(config, algorithm, memo)
    if runtime is None:
        return None
    n = config.num_draft_tokens if config.num_draft_tokens is not None else runtime.num_draft_tokens
    return config.evolve(num_steps=1, topk=1, num_draft_tokens=n)


@hookimpl
def specreg_resolve_candidates(
    config: SpecConfig, algorithm: AlgorithmSpec
) -> list[SpecConfig] | None:
    """Candidate s verifies s drafts: num_draft_tokens = s + 1, one draft forward (num_steps 1)."""
    if algorithm.name not in _ANALYSERS:
        return None
    return [
        config.evolve(num_steps=1, topk=1, num_draft_tokens=s + 1, candidate_steps=None)
        for s in adaptive_steps(config)
    ]


@hookimpl
def specreg_resolve_sizes(
    configs: Sequence[SpecConfig], algorithm: AlgorithmSpec, memo: dict[str, Any]
) -> list[Sizes] | None:
    runtime = runtime_for(configs[0], algorithm, memo) if configs else None
    if runtime is None:
        return None
    return [main_sizes(runtime)] + [candidate_sizes(runtime, (c.num_draft_tokens or 1) - 1) for c in configs[1:]]


@hookimpl
def specreg_validate_config(
    config: SpecConfig,
    algorithm: AlgorithmSpec,
    cache: CacheSpec | None,
    resolution: Resolution | None,
    memo: dict[str, Any],
) -> list[Problem] | None:
    found = _analyse(config, algorithm, memo)
    if found is None:
        return None
    problems = list(found[1])
    if resolution is not None:
        problems += _candidate_problems(algorithm, resolution, memo)
    for name, flag in _FLAGS.items():
        value = getattr(config, name)
        if value is not None and value != 1:
            problems.append(
                problem(
                    "SR107",
                    f"{algorithm.name} drafts one chain per forward: {name}={value} is ignored "
                    f"and {name} is forced to 1",
                    accepted=f"{name} = 1, or unset",
                    fix=f"remove {flag}",
                    field=name,
                    severity="warning",
                )
            )
    return problems


def _candidate_problems(
    algorithm: AlgorithmSpec, resolution: Resolution, memo: dict[str, Any]
) -> list[Problem]:
    runtime = runtime_for(resolution.config, algorithm, memo)
    if runtime is None:
        return []
    most = max_candidate_gamma(runtime)
    return [
        problem(
            "SR312",
            f"{algorithm.name} cannot serve adaptive candidate step {c.steps}: it verifies "
            f"{c.steps} drafts, but one draft block holds at most {most}",
            accepted=f"candidate steps in [0, {most}]",
            fix=f"remove {c.steps} from --speculative-candidate-steps, or raise "
            "--speculative-num-draft-tokens (a larger block)",
            field="candidate_steps",
        )
        for c in resolution.candidates
        if c.steps > most
    ]


def _verify_widths(resolution: Resolution) -> list[int]:
    return sorted({c.num_draft_tokens for c in resolution.configs() if c.num_draft_tokens})


@hookimpl
def specreg_make_verifier(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution, memo: dict[str, Any]
) -> Any | None:
    runtime = runtime_for(config, algorithm, memo)
    if runtime is None:
        return None
    from specreg_dspark.verifier import BlockVerifier

    return BlockVerifier(
        runtime, algorithm, widths=_verify_widths(resolution), filter_order=config.filter_order,
        acceptance=config.acceptance, verify_mode=config.verify_mode,
    )


@hookimpl
def specreg_make_drafter(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution, memo: dict[str, Any]
) -> Any | None:
    runtime = runtime_for(config, algorithm, memo)
    if runtime is None:
        return None
    from specreg_dspark.drafter import BlockDrafter

    return BlockDrafter(
        runtime, gammas=[w - 1 for w in _verify_widths(resolution)],
        filter_order=config.filter_order,
    )


@hookimpl
def specreg_register_errors(register: Callable[..., None]) -> None:
    from specreg_dspark.errors import ENTRIES

    for entry in ENTRIES:
        register(entry)
