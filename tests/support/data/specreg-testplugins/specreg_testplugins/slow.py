"""Imports slowly, then registers a working algorithm."""

import time

from specreg import AlgorithmSpec, hookimpl

time.sleep(1.2)


@hookimpl
def specreg_register_algorithms(register):
    register(AlgorithmSpec(name="slowchain", drafting="chain", verify_rules=("greedy",)))
