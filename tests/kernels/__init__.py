"""Tests of specreg/kernels/: each family's torch and Triton paths against its plain reference."""
