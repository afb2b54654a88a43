"""Shared helpers for the DSpark plugin tests."""

import json
from pathlib import Path

import pytest

DATA = Path(__file__).parent / "data"


def load(name: str) -> dict:
    """A hand-written draft config.json from tests/dspark/data."""
    return json.loads((DATA / f"{name}.json").read_text())


@pytest.fixture(scope="session")
def registry():
    from specreg import Registry

    return Registry.load(allowlist={"dspark"}, fresh=True)
