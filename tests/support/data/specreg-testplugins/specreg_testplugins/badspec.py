"""Registers something that is not an AlgorithmSpec."""

from specreg import hookimpl


@hookimpl
def specreg_register_algorithms(register):
    register({"name": "dict-is-not-a-spec"})
