"""Raises while registering, as a buggy plugin would."""

from specreg import hookimpl


@hookimpl
def specreg_register_algorithms(register):
    raise RuntimeError("boom while registering")
