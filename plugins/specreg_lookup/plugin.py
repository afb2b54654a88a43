"""The lookup plugin's hooks (entry point ``lookup``): `ngram` (prompt lookup) and `suffix`
decoding.

Both draft from the token history alone: no draft model, no draft KV cache, no target hidden
states. A step proposes up to `num_steps` tokens (vLLM's `num_speculative_tokens`), verified
with `num_draft_tokens = num_steps + 1` slots, as a chain (vLLM's semantics: fewer or none when
the history offers fewer) or, with `proposals: "tree"`, as a tree of that many nodes (SGLang's
breadth-first NGRAM trees, arctic-inference's tree speculation). Options ride in `draft_config`
(see `specreg_lookup.sizes`). Torch-free: the drafters and verifier are imported when a plan
builds them. Every hook answers only for `ngram` and `suffix` and returns None otherwise.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any

from specreg.errors import Problem, problem
from specreg.hookspecs import hookimpl
from specreg.contract.specs import AlgorithmSpec, ParamRange
from specreg_lookup.sizes import ngram_options, suffix_options

if TYPE_CHECKING:
    from specreg.contract.config import SpecConfig
    from specreg.contract.resolution import Resolution

#: 63 drafts per step: beyond any framework default (vLLM's suffix: 24), and it bounds buffers.
MAX_NUM_DRAFT_TOKENS = 64
DEFAULT_NGRAM_STEPS = 3

NGRAM_SPEC = AlgorithmSpec(
    name="ngram",
    drafting="chain",
    verify_rules=("greedy", "chain_sampling"),
    description=(
        "Prompt lookup (vLLM ngram, SGLang NGRAM): the tokens that followed an earlier "
        "occurrence of the last n tokens; a chain, or a breadth-first tree over many matches."
    ),
    aliases=("prompt_lookup",),
    uses_target_hidden_states=False,
    owns_draft_kv=False,
    num_steps=ParamRange(minimum=1, maximum=MAX_NUM_DRAFT_TOKENS - 1, default=None),
    topk=ParamRange(minimum=1, maximum=1, default=1),
    num_draft_tokens=ParamRange(
        minimum=2, maximum=MAX_NUM_DRAFT_TOKENS, default=DEFAULT_NGRAM_STEPS + 1
    ),
)
SUFFIX_SPEC = AlgorithmSpec(
    name="suffix",
    drafting="chain",
    verify_rules=("greedy", "chain_sampling"),
    description=(
        "Suffix decoding (vLLM suffix, arctic-inference): suffix trees over the request and "
        "earlier responses; the draft length follows each request's match statistics."
    ),
    aliases=("suffix_decoding",),
    uses_target_hidden_states=False,
    owns_draft_kv=False,
    num_steps=ParamRange(minimum=1, maximum=MAX_NUM_DRAFT_TOKENS - 1, default=None),
    topk=ParamRange(minimum=1, maximum=1, default=1),
    num_draft_tokens=ParamRange(minimum=2, maximum=MAX_NUM_DRAFT_TOKENS, default=None),
)
NAMES = ("ngram", "suffix")


def _default_steps(config: SpecConfig, algorithm: AlgorithmSpec) -> int:
    """ngram: 3; suffix: vLLM's rule, num_speculative_tokens = max_tree_depth (capped)."""
    if algorithm.name == "ngram":
        return DEFAULT_NGRAM_STEPS
    options, _ = suffix_options(config.draft_config)
    return min(options.max_tree_depth, MAX_NUM_DRAFT_TOKENS - 1)


@hookimpl
def specreg_register_errors(register: Callable[..., None]) -> None:
    from specreg_lookup.errors import ENTRIES

    for entry in ENTRIES:
        register(entry)


@hookimpl
def specreg_register_algorithms(register: Callable[..., None]) -> None:
    register(NGRAM_SPEC)
    register(SUFFIX_SPEC)


@hookimpl
def specreg_resolve_config(config: SpecConfig, algorithm: AlgorithmSpec) -> SpecConfig | None:
    """num_draft_tokens = num_steps + 1, either inferred from the other."""
    if algorithm.name not in NAMES:
        return None
    steps, width = config.num_steps, config.num_draft_tokens
    usable = steps is not None and 1 <= steps < MAX_NUM_DRAFT_TOKENS
    if width is None:
        # An out-of-range num_steps is reported by validation (SR103); infer something harmless.
        width = steps + 1 if usable and steps is not None else _default_steps(config, algorithm) + 1
    if steps is None:
        steps = width - 1
    topk = config.topk if config.topk is not None else 1
    return config.evolve(num_steps=steps, topk=topk, num_draft_tokens=width)


@hookimpl
def specreg_validate_config(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution | None
) -> list[Problem]:
    """Every problem at once: the options (SR490-SR493) and a width that is not steps + 1."""
    if algorithm.name not in NAMES:
        return []
    effective = resolution.config if resolution is not None else config
    if algorithm.name == "ngram":
        _, problems = ngram_options(config.draft_config)
    else:
        _, problems = suffix_options(config.draft_config, effective.num_steps)

    steps, width = config.num_steps, config.num_draft_tokens
    if steps is not None and width is not None and width != steps + 1:
        problems.append(problem(
            "SR494",
            f"{algorithm.name} proposes num_steps={steps} tokens, verified with "
            f"num_draft_tokens = num_steps + 1 = {steps + 1}, got {width}",
            accepted=f"num_draft_tokens = {steps + 1} for num_steps = {steps}",
            fix="set only one of --speculative-num-steps and --speculative-num-draft-tokens",
            field="num_draft_tokens",
        ))
    return problems


@hookimpl
def specreg_make_drafter(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution
) -> Any | None:
    if algorithm.name not in NAMES or config.num_steps is None:
        return None
    # the plan's gamma: the widest over the adaptive candidates (each verifies a prefix)
    steps = resolution.gamma
    if algorithm.name == "ngram":
        from specreg_lookup.drafter import NgramDrafter

        return NgramDrafter(ngram_options(config.draft_config)[0], num_steps=steps)
    from specreg_lookup.drafter import SuffixDrafter

    return SuffixDrafter(suffix_options(config.draft_config)[0], num_steps=steps)


@hookimpl
def specreg_make_verifier(
    config: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution
) -> Any | None:
    if algorithm.name not in NAMES or config.num_draft_tokens is None:
        return None
    from specreg_lookup.verifier import LookupVerifier

    widths = sorted({c.num_draft_tokens for c in resolution.configs() if c.num_draft_tokens})
    return LookupVerifier(
        num_draft_tokens=max(widths), widths=widths, acceptance=config.acceptance,
        verify_mode=config.verify_mode,
    )
