"""A well-behaved chain algorithm whose draft worker verifies one token fewer."""

from specreg import AlgorithmSpec, ParamRange, hookimpl


@hookimpl
def specreg_register_algorithms(register):
    register(
        AlgorithmSpec(
            name="toychain",
            aliases=("tc",),
            drafting="chain",
            verify_rules=("greedy", "chain_sampling"),
            description="test chain drafter",
            num_draft_tokens=ParamRange(minimum=2, maximum=16, default=5),
        )
    )


@hookimpl
def specreg_num_tokens_per_req(config, algorithm, phase, is_draft_worker):
    if algorithm.name != "toychain" or phase != "target_verify" or not is_draft_worker:
        return None
    return config.num_draft_tokens - 1
