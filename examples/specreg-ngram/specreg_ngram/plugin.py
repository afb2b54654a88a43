"""The specreg hooks of the `ngram_example` algorithm. Imports neither torch nor triton.

specreg loads this module through the entry point `ngram = "specreg_ngram.plugin"` (group
`specreg`). It implements only what differs from specreg's default plugin:

- `specreg_register_algorithms`: declare `ngram_example` and its capabilities (a chain drafter with no
  draft model, hence no draft KV cache and no target hidden states).
- `specreg_resolve_config`: a chain of `num_steps` drafts is verified with
  `num_draft_tokens = num_steps + 1` tokens, so either one is inferred from the other.
- `specreg_register_errors`: the plugin's own catalog entry (SR501, defined in
  `specreg_ngram.errors`), so `specreg explain SR501` documents its error like a built-in one.
- `specreg_validate_config`: reject a config that sets both inconsistently (SR501).
- `specreg_make_drafter`: the `NgramDrafter` a generation loop calls for proposals (the plan
  holds it as `plan.drafter`; torch is imported only here, at resolve time).

Gamma (`num_draft_tokens - 1`), the per-phase widths and the verifier (specreg's chain verifier,
greedy or rejection sampling with one-hot draft probabilities) are the default plugin's.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING

from specreg import AlgorithmSpec, ParamRange, Problem, hookimpl, problem

from specreg_ngram.errors import CHAIN_MISMATCH

if TYPE_CHECKING:
    from specreg import SpecConfig
    from specreg.contract.resolution import Resolution

NAME = "ngram_example"
DEFAULT_NUM_DRAFT_TOKENS = 4
MAX_NUM_DRAFT_TOKENS = 32

NGRAM = AlgorithmSpec(
    name=NAME,
    drafting="chain",
    verify_rules=("greedy", "chain_sampling"),
    description=(
        "Prompt lookup: drafts the tokens that followed the latest earlier occurrence of the "
        "last n-gram. No draft model; chain verification."
    ),
    aliases=("prompt_lookup_example",),
    uses_target_hidden_states=False,
    owns_draft_kv=False,
    num_steps=ParamRange(minimum=1, maximum=MAX_NUM_DRAFT_TOKENS - 1, default=None),
    topk=ParamRange(minimum=1, maximum=1, default=1),
    num_draft_tokens=ParamRange(
        minimum=2, maximum=MAX_NUM_DRAFT_TOKENS, default=DEFAULT_NUM_DRAFT_TOKENS
    ),
)


@hookimpl
def specreg_register_errors(register: Callable[..., None]) -> None:
    register(CHAIN_MISMATCH)


@hookimpl
def specreg_register_algorithms(register: Callable[..., None]) -> None:
    register(NGRAM)


@hookimpl
def specreg_resolve_config(config: SpecConfig, algorithm: AlgorithmSpec) -> SpecConfig | None:
    if algorithm.name != NAME:
        return None  # not ours: the next plugin (finally the default plugin) answers
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
def specreg_validate_config(config: SpecConfig, algorithm: AlgorithmSpec) -> list[Problem]:
    # A hook implementation takes only the arguments it needs (here not cache or resolution).
    if algorithm.name != NAME:
        return []
    steps, draft_tokens = config.num_steps, config.num_draft_tokens
    if steps is None or draft_tokens is None or draft_tokens == steps + 1:
        return []  # ranges themselves are checked by the default plugin from NGRAM's ParamRanges
    return [
        problem(
            CHAIN_MISMATCH.code,
            f"ngram drafts a chain: num_steps={steps} drafts are verified with "
            f"num_draft_tokens = num_steps + 1 = {steps + 1}, got {draft_tokens}",
            accepted=f"num_draft_tokens = {steps + 1} for num_steps = {steps}",
            fix="set only one of --speculative-num-steps and --speculative-num-draft-tokens",
            field="num_draft_tokens",
        )
    ]


@hookimpl
def specreg_make_drafter(algorithm: AlgorithmSpec, resolution: Resolution) -> object | None:
    if algorithm.name != NAME:
        return None
    from specreg_ngram.drafter import NgramDrafter

    # the plan's gamma: the widest over adaptive candidates, which verify a prefix of the chain
    return NgramDrafter(num_draft_tokens=resolution.gamma + 1)
