"""Hardening tests: `fuzz_long` tells a test whether `--fuzz-long` (tests/conftest.py) was given."""

from __future__ import annotations

import pytest


@pytest.fixture
def fuzz_long(request) -> bool:
    return bool(request.config.getoption("--fuzz-long", default=False))
