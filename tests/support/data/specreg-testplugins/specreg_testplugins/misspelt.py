"""Implements a hook name that does not exist."""

from specreg import hookimpl


@hookimpl
def specreg_resolve_gama(config, algorithm):
    return 1
