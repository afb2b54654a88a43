"""Replaces the toy algorithm explicitly, and answers its gamma differently."""

from specreg import AlgorithmSpec, ParamRange, hookimpl


@hookimpl
def specreg_register_algorithms(register):
    register(
        AlgorithmSpec(
            name="toychain",
            drafting="block",
            verify_rules=("greedy",),
            description="replacement",
            num_draft_tokens=ParamRange(minimum=2, maximum=8, default=3),
        ),
        override=True,
    )


@hookimpl
def specreg_resolve_gamma(config, algorithm):
    if algorithm.name != "toychain":
        return None
    return config.num_draft_tokens - 2  # the default answers num_draft_tokens - 1
