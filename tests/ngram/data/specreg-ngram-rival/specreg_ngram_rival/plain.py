"""Registers `ngram_example` without override: a name conflict (SR112) with specreg-ngram."""

from specreg import hookimpl
from specreg_ngram_rival import rival_spec


@hookimpl
def specreg_register_algorithms(register):
    register(rival_spec())
