"""The hooks of the built-in standalone draft-model plugin (the `draft_model` entry point); torch-free.

Registers `draft_model` (vLLM's method name) with the aliases `standalone` (SGLang's
`--speculative-algorithm STANDALONE`) and `draft_target` (TensorRT-LLM's DRAFT_TARGET): a second,
smaller causal model drafts a chain of `num_steps` tokens autoregressively, verified with
`num_draft_tokens = num_steps + 1` tokens by specreg's chain verifier (greedy, or rejection
sampling with the draft's q). Widths and gamma are the default plugin's (gamma =
num_draft_tokens - 1, draft_decode = 1). This plugin infers num_steps and num_draft_tokens from
each other, checks the draft checkpoint's vocabulary against the target's before any model loads
(SR470, SR471) and builds the drafter.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from specreg.errors import Problem, problem
from specreg.hookspecs import hookimpl
from specreg.contract.specs import AlgorithmSpec, ParamRange
from specreg_draft_model.checkpoint import vocab_problems

if TYPE_CHECKING:
    from collections.abc import Callable

    from specreg.contract.config import SpecConfig
    from specreg.contract.resolution import Resolution

NAME = "draft_model"
#: vLLM leaves num_speculative_tokens to the user; SGLang's chain default is 3 steps.
DEFAULT_NUM_DRAFT_TOKENS = 4
#: gamma <= 31 bounds the verify buffers; published draft-model setups use k <= 8.
MAX_NUM_DRAFT_TOKENS = 32

DRAFT_MODEL = AlgorithmSpec(
    name=NAME,
    drafting="chain",
    verify_rules=("greedy", "chain_sampling"),
    description=(
        "A standalone, smaller causal draft model drafts num_steps tokens autoregressively; "
        "its KV cache is rolled back to the accepted length. Chain verification, with the "
        "draft's q when sampling."
    ),
    aliases=("standalone", "draft_target"),
    uses_target_hidden_states=False,
    owns_draft_kv=True,
    num_steps=ParamRange(minimum=1, maximum=MAX_NUM_DRAFT_TOKENS - 1, default=None),
    topk=ParamRange(minimum=1, maximum=1, default=1),
    num_draft_tokens=ParamRange(
        minimum=2, maximum=MAX_NUM_DRAFT_TOKENS, default=DEFAULT_NUM_DRAFT_TOKENS
    ),
)


def draft_flag(config: SpecConfig) -> str:
    """How the user named the draft checkpoint, in their framework's terms."""
    if config.framework.get("framework") == "vllm":
        return "the speculative config's 'model'"
    return "--speculative-draft-model-path"


@hookimpl
def specreg_register_algorithms(register: Callable[..., None]) -> None:
    register(DRAFT_MODEL)


@hookimpl
def specreg_register_errors(register: Callable[..., None]) -> None:
    from specreg_draft_model.errors import ENTRIES

    for entry in ENTRIES:
        register(entry)


@hookimpl
def specreg_resolve_config(config: SpecConfig, algorithm: AlgorithmSpec) -> SpecConfig | None:
    if algorithm.name != NAME:
        return None
    steps, draft_tokens = config.num_steps, config.num_draft_tokens
    if draft_tokens is None:
        # An out-of-range num_steps is reported by validation (SR103); infer something harmless.
        usable = steps is not None and 1 <= steps < MAX_NUM_DRAFT_TOKENS
        draft_tokens = steps + 1 if usable else DEFAULT_NUM_DRAFT_TOKENS
    if steps is None:
        steps = draft_tokens - 1
    topk = config.topk if config.topk is not None else 1
    return config.evolve(num_steps=steps, topk=topk, num_draft_tokens=draft_tokens)


@hookimpl
def specreg_validate_config(config: SpecConfig, algorithm: AlgorithmSpec) -> list[Problem] | None:
    if algorithm.name != NAME:
        return None
    problems = vocab_problems(
        config.draft_config,
        config.framework.get("target_vocab_size"),
        draft_flag=draft_flag(config),
        algorithm=NAME,
    )
    steps, draft_tokens = config.num_steps, config.num_draft_tokens
    if steps is not None and draft_tokens is not None and draft_tokens != steps + 1:
        problems.append(
            problem(
                "SR472",
                f"draft_model drafts a chain: num_steps={steps} drafts are verified with "
                f"num_draft_tokens = num_steps + 1 = {steps + 1}, got {draft_tokens}",
                accepted=f"num_draft_tokens = {steps + 1} for num_steps = {steps}",
                fix="set only one of --speculative-num-steps and --speculative-num-draft-tokens "
                "(vLLM: num_speculative_tokens)",
                field="num_draft_tokens",
            )
        )
    return problems


@hookimpl
def specreg_make_drafter(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution
) -> Any | None:
    if algorithm.name != NAME:
        return None
    from specreg_draft_model.drafter import DraftModelDrafter

    gammas = sorted({int(c.num_draft_tokens) - 1 for c in resolution.configs()})
    vocab = None
    if config.draft_config is not None:
        from specreg_draft_model.checkpoint import vocab_size_of

        vocab = vocab_size_of(config.draft_config)[0]
    return DraftModelDrafter(gammas=gammas, vocab_size=vocab)
