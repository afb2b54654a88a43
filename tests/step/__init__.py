"""Tests of specreg/step/: the chain verifier, draft sampling, draft lengths, verify modes and acceptance statistics."""
