"""Claims the toy plugin's name without declaring an override."""

from specreg import AlgorithmSpec, hookimpl


@hookimpl
def specreg_register_algorithms(register):
    register(AlgorithmSpec(name="toychain", drafting="chain", verify_rules=("greedy",)))
