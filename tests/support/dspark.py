"""Shared helpers for the DSpark plugin tests (imported by the test modules)."""

import json
from pathlib import Path

DATA = Path(__file__).parents[1] / "dspark" / "data"


def load(name: str) -> dict:
    """A hand-written draft config.json from tests/dspark/data."""
    return json.loads((DATA / f"{name}.json").read_text())
