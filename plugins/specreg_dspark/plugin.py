"""Hook implementations of the DSpark plugin (entry point ``dspark``). Torch-free at import.

Every hook answers only for the algorithms ``dspark`` and ``dflash`` and returns None otherwise,
so specreg's default plugin (or another plugin) answers for the rest.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from specreg.errors import Problem, problem
from specreg.hookspecs import hookimpl
from specreg.specs import AlgorithmSpec, ParamRange
from specreg_dspark.config import (
    DEFAULT_DFLASH_BLOCK_SIZE,
    DEFAULT_DSPARK_GAMMA,
    BlockRuntime,
    analyse_dflash,
    analyse_dspark,
)

if TYPE_CHECKING:
    from specreg.config import SpecConfig
    from specreg.phase import Phase
    from specreg.resolution import Resolution
    from specreg.specs import CacheSpec

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
SPECS: dict[str, AlgorithmSpec] = {DSPARK_SPEC.name: DSPARK_SPEC, DFLASH_SPEC.name: DFLASH_SPEC}
_FLAGS = {"topk": "--speculative-eagle-topk", "num_steps": "--speculative-num-steps"}


def _analyse(config: SpecConfig, algorithm: AlgorithmSpec) -> tuple[BlockRuntime, list[Problem]] | None:
    if algorithm.name == "dspark":
        return analyse_dspark(config.draft_config, config.num_draft_tokens)
    if algorithm.name == "dflash":
        return analyse_dflash(config.draft_config, config.num_draft_tokens)
    return None


def runtime_for(config: SpecConfig, algorithm: AlgorithmSpec) -> BlockRuntime | None:
    """The resolved runtime (gamma, widths, layout) of a dspark/dflash config, else None."""
    found = _analyse(config, algorithm)
    return None if found is None else found[0]


@hookimpl
def specreg_register_algorithms(register: Callable[..., None]) -> None:
    register(DSPARK_SPEC)
    register(DFLASH_SPEC)


@hookimpl
def specreg_resolve_config(config: SpecConfig, algorithm: AlgorithmSpec) -> SpecConfig | None:
    """topk and num_steps are 1 (a block drafter proposes one chain in one forward); n comes
    from the command line, else the checkpoint, else the default."""
    runtime = runtime_for(config, algorithm)
    if runtime is None:
        return None
    n = config.num_draft_tokens if config.num_draft_tokens is not None else runtime.num_draft_tokens
    return config.evolve(num_steps=1, topk=1, num_draft_tokens=n)


@hookimpl
def specreg_resolve_gamma(config: SpecConfig, algorithm: AlgorithmSpec) -> int | None:
    runtime = runtime_for(config, algorithm)
    return None if runtime is None else runtime.gamma


@hookimpl
def specreg_num_tokens_per_req(
    config: SpecConfig, algorithm: AlgorithmSpec, phase: Phase, is_draft_worker: bool
) -> int | None:
    runtime = runtime_for(config, algorithm)
    if runtime is None:
        return None
    return runtime.widths(is_draft_worker)[phase.value]


@hookimpl
def specreg_validate_config(
    config: SpecConfig,
    algorithm: AlgorithmSpec,
    cache: CacheSpec | None,
    resolution: Resolution | None,
) -> list[Problem] | None:
    found = _analyse(config, algorithm)
    if found is None:
        return None
    problems = list(found[1])
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


@hookimpl
def specreg_make_verifier(config: SpecConfig, algorithm: AlgorithmSpec) -> Any | None:
    runtime = runtime_for(config, algorithm)
    if runtime is None:
        return None
    from specreg_dspark.verifier import BlockVerifier

    return BlockVerifier(runtime)
