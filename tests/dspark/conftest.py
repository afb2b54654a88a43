"""Fixtures for the DSpark plugin tests."""

import pytest


@pytest.fixture(scope="session")
def registry():
    from specreg import Registry

    return Registry.load(allowlist={"dspark"}, fresh=True)
