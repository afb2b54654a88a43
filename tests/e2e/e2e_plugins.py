"""Specs shared by the deliberately broken test plugins of the e2e tests."""

from specreg import AlgorithmSpec, ParamRange


def small_chain_spec(name: str) -> AlgorithmSpec:
    """A greedy chain drafter verifying 2 to 6 tokens (default 3)."""
    return AlgorithmSpec(
        name=name, drafting="chain", verify_rules=("greedy",), num_draft_tokens=ParamRange(2, 6, 3)
    )
