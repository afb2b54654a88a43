"""Hardening tests: the `--fuzz-long` option (also registered by tests/fuzz; first one wins)."""

from __future__ import annotations

import pytest


def pytest_addoption(parser) -> None:
    try:
        parser.addoption(
            "--fuzz-long",
            action="store_true",
            default=False,
            help="run the long fuzz and load profiles (>= 10,000 examples / swap calls)",
        )
    except ValueError:
        pass


@pytest.fixture
def fuzz_long(request) -> bool:
    return bool(request.config.getoption("--fuzz-long", default=False))
