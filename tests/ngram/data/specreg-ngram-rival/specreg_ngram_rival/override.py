"""Registers `ngram_example` with override=True: it replaces specreg-ngram's algorithm."""

from specreg import hookimpl
from specreg_ngram_rival import rival_spec


@hookimpl
def specreg_register_algorithms(register):
    register(rival_spec(), override=True)
