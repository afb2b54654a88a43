"""The hooks of the built-in EAGLE plugin (what the `eagle` entry point names); torch-free.

Registers `eagle` (alias `nextn`) and `eagle3`: tree drafters whose draft loop runs `num_steps`
steps of `topk` branches and keeps `num_draft_tokens - 1` drafts (plus the root) for verification.
Widths and gamma are the default plugin's (draft_decode = topk, draft_extend = target_verify =
num_draft_tokens, gamma = num_draft_tokens - 1); this plugin infers unset parameters, derives
adaptive candidates (chains and trees), validates the tree size, registers its error codes and
builds the verifier and the drafter, sized for every candidate. The size rules live in
`specreg_eagle.sizes`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specreg.errors import Problem, problem
from specreg.hookspecs import hookimpl
from specreg.contract.specs import AlgorithmSpec, ParamRange
from specreg_eagle.sizes import (
    candidate_draft_tokens,
    max_tree_nodes,
    resolved_draft_tokens,
    widths_by_steps,
)

if TYPE_CHECKING:
    from collections.abc import Callable

    from specreg.contract.config import SpecConfig
    from specreg.contract.resolution import Resolution
    from specreg.contract.specs import CacheSpec

#: SGLang's defaults: (num_steps, topk, num_draft_tokens) = (3, 1, 4).
DEFAULT_NUM_STEPS = 3
DEFAULT_TOPK = 1
NAMES = frozenset({"eagle", "eagle3"})
VERIFY_RULES = ("tree_greedy", "tree_sampling", "greedy", "chain_sampling")


# Upper bounds keep buffers sane (a verify of N tokens allocates N x vocab rows per request);
# they are far above what any published EAGLE configuration uses.
MAX_NUM_STEPS = 32
MAX_TOPK = 32
MAX_NUM_DRAFT_TOKENS = 1024


def _spec(name: str, *, aliases: tuple[str, ...], description: str) -> AlgorithmSpec:
    return AlgorithmSpec(
        name=name,
        drafting="tree",
        verify_rules=VERIFY_RULES,
        description=description,
        aliases=aliases,
        uses_target_hidden_states=True,
        owns_draft_kv=True,
        num_steps=ParamRange(minimum=1, maximum=MAX_NUM_STEPS, default=DEFAULT_NUM_STEPS),
        topk=ParamRange(minimum=1, maximum=MAX_TOPK, default=DEFAULT_TOPK),
        num_draft_tokens=ParamRange(minimum=2, maximum=MAX_NUM_DRAFT_TOKENS, default=None),
    )


EAGLE = _spec(
    "eagle",
    aliases=("nextn",),
    description=(
        "EAGLE / EAGLE-2 tree drafting from the target's last hidden state (alias nextn: "
        "multi-token-prediction heads). Tree greedy and tree sampling verification."
    ),
)
EAGLE3 = _spec(
    "eagle3",
    aliases=(),
    description=(
        "EAGLE-3: the EAGLE tree drafter conditioned on target hidden states from several "
        "layers. Same tree kernels and verification as eagle."
    ),
)


def _owned(algorithm: AlgorithmSpec) -> bool:
    return algorithm.name in NAMES


@hookimpl
def specreg_register_algorithms(register: Callable[..., None]) -> None:
    register(EAGLE)
    register(EAGLE3)


@hookimpl
def specreg_register_errors(register: Callable[..., None]) -> None:
    from specreg_eagle.errors import ENTRIES

    for entry in ENTRIES:
        register(entry)


@hookimpl
def specreg_resolve_config(config: SpecConfig, algorithm: AlgorithmSpec) -> SpecConfig | None:
    if not _owned(algorithm):
        return None
    steps = config.num_steps if config.num_steps is not None else DEFAULT_NUM_STEPS
    topk = config.topk if config.topk is not None else DEFAULT_TOPK
    draft_tokens = resolved_draft_tokens(steps, topk, config.num_draft_tokens)
    return config.evolve(num_steps=steps, topk=topk, num_draft_tokens=draft_tokens)


@hookimpl
def specreg_resolve_candidates(
    config: SpecConfig, algorithm: AlgorithmSpec
) -> list[SpecConfig] | None:
    if not _owned(algorithm):
        return None
    from specreg.contract.resolution import adaptive_steps

    topk, main = config.topk or DEFAULT_TOPK, config.num_draft_tokens or 2
    main_steps = config.num_steps or DEFAULT_NUM_STEPS
    return [
        config.evolve(
            num_steps=s,
            num_draft_tokens=candidate_draft_tokens(s, topk, main_steps, main),
            candidate_steps=None,
        )
        for s in adaptive_steps(config)
    ]


@hookimpl
def specreg_validate_config(
    config: SpecConfig,
    algorithm: AlgorithmSpec,
    cache: CacheSpec | None,
    resolution: Resolution | None,
) -> list[Problem] | None:
    if not _owned(algorithm):
        return None
    effective = resolution.config if resolution is not None else config
    steps, topk, draft_tokens = effective.num_steps, effective.topk, effective.num_draft_tokens
    if None in (steps, topk, draft_tokens) or steps < 1 or topk < 1 or draft_tokens < 2:
        return []  # unset or out of the declared ranges: the default plugin reports SR103
    given = "given" if config.num_draft_tokens is not None else "inferred"
    if topk == 1 and draft_tokens != steps + 1:
        return [
            problem(
                "SR201",
                f"{algorithm.name}: topk=1 drafts a chain of num_steps={steps} tokens, so "
                f"num_draft_tokens must be {steps + 1}, got {draft_tokens} ({given})",
                accepted=f"num_draft_tokens = num_steps + 1 = {steps + 1} when topk = 1",
                fix=f"set --speculative-num-draft-tokens {steps + 1} (or leave it unset), or "
                "raise --speculative-eagle-topk",
                field="num_draft_tokens",
            )
        ]
    if topk > 1 and effective.acceptance.kind in ("typical", "synthetic"):
        return [
            problem(
                "SR315",
                f"{algorithm.name}: {effective.acceptance.kind} acceptance is a chain rule, and "
                f"topk={topk} drafts a tree",
                accepted="typical or synthetic acceptance with topk 1; relaxed thresholds with "
                "any topk",
                fix="set --speculative-eagle-topk 1, or use --speculative-accept-threshold-single"
                " / --speculative-accept-threshold-acc",
                field="acceptance",
            )
        ]
    nodes = max_tree_nodes(steps, topk)
    if draft_tokens > nodes:
        return [
            problem(
                "SR200",
                f"{algorithm.name}: num_draft_tokens={draft_tokens} ({given}) exceeds the "
                f"{nodes} tree nodes that num_steps={steps}, topk={topk} can produce",
                accepted=f"2 <= num_draft_tokens <= 1 + topk + (num_steps - 1) * topk**2 = {nodes}",
                fix=f"set --speculative-num-draft-tokens to at most {nodes}, or raise "
                "--speculative-num-steps / --speculative-eagle-topk",
                field="num_draft_tokens",
            )
        ]
    return []


@hookimpl
def specreg_make_verifier(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution
) -> Any | None:
    if not _owned(algorithm):
        return None
    from specreg_eagle.verifier import EagleVerifier

    table = widths_by_steps(resolution)
    return EagleVerifier(
        num_steps=max(table), topk=config.topk or DEFAULT_TOPK, num_draft_tokens=max(table.values()),
        widths_by_steps=table, filter_order=config.filter_order, acceptance=config.acceptance,
        verify_mode=config.verify_mode,
    )


@hookimpl
def specreg_make_drafter(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution
) -> Any | None:
    if not _owned(algorithm):
        return None
    from specreg_eagle.drafter import EagleDrafter

    return EagleDrafter(
        topk=config.topk or DEFAULT_TOPK, widths_by_steps=widths_by_steps(resolution),
        filter_order=config.filter_order,
    )
