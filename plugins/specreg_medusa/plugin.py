"""The hooks of the built-in Medusa plugin (what the `medusa` entry point names); torch-free.

Registers `medusa` (vLLM's method name; TensorRT-LLM's MEDUSA): `num_steps` heads on the
target's last hidden state each propose their `topk` best tokens for one position, and a static
tree of `num_draft_tokens - 1` of those choices (`specreg_medusa.sizes`) is verified by the
core's tree verifier (`specreg.step.tree_verifier`). Widths and gamma are the default plugin's (draft_decode = topk,
draft_extend = target_verify = num_draft_tokens, gamma = num_draft_tokens - 1). This plugin
infers unset parameters (num_steps from the checkpoint's head count; vLLM's
num_speculative_tokens alone means a chain of that many heads, as vLLM drafts), derives adaptive
candidates (fewer heads), validates the heads checkpoint and the tree size, and builds the
verifier and the drafter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specreg.errors import Problem, problem
from specreg.hookspecs import hookimpl
from specreg.contract.specs import AlgorithmSpec, ParamRange
from specreg_medusa.checkpoint import MedusaHeadsConfig, parse_heads_config
from specreg_medusa.sizes import infer_num_draft_tokens, tree_nodes, widths_by_steps

if TYPE_CHECKING:
    from collections.abc import Callable

    from specreg.contract.config import SpecConfig
    from specreg.contract.resolution import Resolution
    from specreg.contract.specs import CacheSpec

NAME = "medusa"
#: Medusa checkpoints ship 3-5 heads; vLLM's MedusaConfig defaults to 5, specreg to 4.
DEFAULT_NUM_HEADS = 4
DEFAULT_TOPK = 2
MAX_HEADS = 16
MAX_TOPK = 16
#: Wider verify batches than this are far beyond Medusa's published trees (64 nodes).
MAX_NUM_DRAFT_TOKENS = 256
_MEMO = "specreg_medusa.heads"

MEDUSA = AlgorithmSpec(
    name=NAME,
    drafting="tree",
    verify_rules=("tree_greedy", "tree_sampling", "greedy", "chain_sampling"),
    description=(
        "Medusa: num_steps heads on the target's last hidden state propose topk tokens each; "
        "a static tree of their top choices, verified by the core tree verifier."
    ),
    uses_target_hidden_states=True,
    owns_draft_kv=False,
    num_steps=ParamRange(minimum=1, maximum=MAX_HEADS, default=None),
    topk=ParamRange(minimum=1, maximum=MAX_TOPK, default=DEFAULT_TOPK),
    num_draft_tokens=ParamRange(minimum=2, maximum=MAX_NUM_DRAFT_TOKENS, default=None),
)


def draft_flag(config: SpecConfig) -> str:
    if config.framework.get("framework") == "vllm":
        return "the speculative config's 'model'"
    return "--speculative-draft-model-path"


def _heads(config: SpecConfig, memo: dict[str, Any]) -> tuple[MedusaHeadsConfig, list[Problem]]:
    if _MEMO not in memo:
        memo[_MEMO] = parse_heads_config(config.draft_config, draft_flag=draft_flag(config))
    return memo[_MEMO]  # type: ignore[no-any-return]


@hookimpl
def specreg_register_algorithms(register: Callable[..., None]) -> None:
    register(MEDUSA)


@hookimpl
def specreg_register_errors(register: Callable[..., None]) -> None:
    from specreg_medusa.errors import ENTRIES

    for entry in ENTRIES:
        register(entry)


@hookimpl
def specreg_resolve_config(
    config: SpecConfig, algorithm: AlgorithmSpec, memo: dict[str, Any]
) -> SpecConfig | None:
    if algorithm.name != NAME:
        return None
    heads = _heads(config, memo)[0].num_heads
    steps, topk, draft_tokens = config.num_steps, config.topk, config.num_draft_tokens
    if steps is None and topk in (None, 1) and draft_tokens is not None:
        steps, topk = draft_tokens - 1, 1  # vLLM: num_speculative_tokens heads, one token each
    steps = steps if steps is not None else (heads or DEFAULT_NUM_HEADS)
    topk = topk if topk is not None else DEFAULT_TOPK
    if draft_tokens is None:
        usable = 1 <= steps <= MAX_HEADS and 1 <= topk <= MAX_TOPK
        draft_tokens = infer_num_draft_tokens(steps, topk) if usable else 2
    return config.evolve(num_steps=steps, topk=topk, num_draft_tokens=draft_tokens)


@hookimpl
def specreg_resolve_candidates(
    config: SpecConfig, algorithm: AlgorithmSpec, memo: dict[str, Any]
) -> list[SpecConfig] | None:
    if algorithm.name != NAME:
        return None
    from specreg.contract.resolution import adaptive_steps

    topk, main = config.topk or DEFAULT_TOPK, config.num_draft_tokens or 2
    # A main width equal to the inferred one counts as inferred, so a plan's own config (which
    # states the inferred width) resolves to the same candidates: each its own inferred width.
    inferred = config.num_steps is not None and main == infer_num_draft_tokens(
        config.num_steps, topk)
    out = []
    for s in adaptive_steps(config):
        width = infer_num_draft_tokens(s, topk) if inferred or topk == 1 else min(
            max(main, s + 1), tree_nodes(s, topk)
        )
        out.append(config.evolve(num_steps=s, num_draft_tokens=width, candidate_steps=None))
    return out


@hookimpl
def specreg_validate_config(
    config: SpecConfig,
    algorithm: AlgorithmSpec,
    cache: CacheSpec | None,
    resolution: Resolution | None,
    memo: dict[str, Any],
) -> list[Problem] | None:
    if algorithm.name != NAME:
        return None
    from specreg_draft_model.checkpoint import vocab_problems

    parsed, problems = _heads(config, memo)
    problems = list(problems)
    problems += vocab_problems(
        config.draft_config, config.framework.get("target_vocab_size"),
        draft_flag=draft_flag(config), algorithm=NAME, codes=("SR483", "SR484"),
        subject="the Medusa heads", required=False,
    )
    effective = resolution.config if resolution is not None else config
    steps, topk, width = effective.num_steps, effective.topk, effective.num_draft_tokens
    if None in (steps, topk, width) or not (
        MEDUSA.num_steps.contains(steps) and MEDUSA.topk.contains(topk)
    ):
        return problems  # unset or out of range: the default plugin reports SR103
    served = [steps] + ([c.steps for c in resolution.candidates] if resolution else [])
    if parsed.num_heads is not None and max(served) > parsed.num_heads:
        problems.append(problem(
            "SR481",
            f"medusa: num_steps={max(served)} needs {max(served)} heads, but the heads "
            f"checkpoint has {parsed.num_heads}",
            accepted=f"num_steps (and every candidate step) <= {parsed.num_heads}",
            fix=f"set --speculative-num-steps to at most {parsed.num_heads} (vLLM: "
            "num_speculative_tokens), or leave it unset",
            field="num_steps",
        ))
    nodes = tree_nodes(steps, topk)
    if not steps + 1 <= width <= nodes:
        given = "given" if config.num_draft_tokens is not None else "inferred"
        problems.append(problem(
            "SR482",
            f"medusa: num_draft_tokens={width} ({given}) does not fit the static tree of "
            f"num_steps={steps} heads with topk={topk}",
            accepted=f"{steps + 1} <= num_draft_tokens <= {nodes} (the top-1 chain through "
            "every head, at most every path of topk choices)",
            fix=f"set --speculative-num-draft-tokens within [{steps + 1}, {nodes}] or leave it "
            "unset; raise --speculative-eagle-topk for a wider tree",
            field="num_draft_tokens",
        ))
    return problems


@hookimpl
def specreg_make_verifier(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution
) -> Any | None:
    if algorithm.name != NAME:
        return None
    from specreg.step.tree_verifier import TreeVerifier

    table = widths_by_steps(resolution.configs())
    return TreeVerifier(
        num_steps=max(table), topk=config.topk or DEFAULT_TOPK,
        num_draft_tokens=max(table.values()), widths_by_steps=table,
        filter_order=config.filter_order, acceptance=config.acceptance,
        verify_mode=config.verify_mode,
    )


@hookimpl
def specreg_make_drafter(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution, memo: dict[str, Any]
) -> Any | None:
    if algorithm.name != NAME:
        return None
    from specreg_medusa.drafter import MedusaDrafter

    heads = _heads(config, memo)[0]
    return MedusaDrafter(
        topk=config.topk or DEFAULT_TOPK, widths_by_steps=widths_by_steps(resolution.configs()),
        num_layers=heads.num_layers if heads.num_layers is not None else 1,
        filter_order=config.filter_order,
    )
