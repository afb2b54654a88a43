"""Test plugins that register the name `ngram_example` again: once plainly, once as an override."""

from specreg import AlgorithmSpec, ParamRange

RIVAL_DEFAULT_NUM_DRAFT_TOKENS = 6


def rival_spec() -> AlgorithmSpec:
    return AlgorithmSpec(
        name="ngram_example",
        drafting="chain",
        verify_rules=("greedy",),
        description="a rival prompt-lookup drafter",
        owns_draft_kv=False,
        num_draft_tokens=ParamRange(minimum=2, default=RIVAL_DEFAULT_NUM_DRAFT_TOKENS),
    )
