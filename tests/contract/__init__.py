"""Tests of specreg/contract/: specs, configs, phases, memory, substitutions and the acceptance rules."""
