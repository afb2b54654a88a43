"""vLLM 0.33.0 against specreg: speculative-config dicts, the adapter and the custom_class proposer."""

from __future__ import annotations

import itertools
import json
from pathlib import Path
from typing import Any

import pytest

from specreg.adapters.common import outcome
from specreg.adapters.deviations import audit, difference, load_table
from specreg.registry import Registry
from tests.adapters.conftest import run_in_env

HERE = Path(__file__).parent
FIELDS = ("gamma", "verify_width")
DRAFTS = {"eagle": "llama", "eagle3": "llama", "dflash": "dflash-draft", "dspark": "dspark-draft"}


def grid(models: dict[str, Path]) -> list[dict[str, Any]]:
    """40 cases: four draft-model methods, k unset and set, two targets."""
    cases = []
    for (method, draft), k, target in itertools.product(DRAFTS.items(), (None, 1, 2, 3, 7), ("llama", "qwen2")):
        spec: dict[str, Any] = {"method": method, "model": str(models[draft])}
        if k is not None:
            spec["num_speculative_tokens"] = k
        cases.append({"method": method, "k_set": k is not None, "target": str(models[target]), "spec": spec})
    for i, case in enumerate(cases):
        case["id"] = i
    return cases


def vllm_outcome(result: dict[str, Any]) -> dict[str, Any]:
    if result["error"]:
        return {"error": result["error"]}
    return {"error": None, "gamma": result["k"], "verify_width": result["k"] + 1}


def specreg_outcome(registry, spec: dict[str, Any]) -> dict[str, Any]:
    ours = outcome(registry, dict(spec))
    if ours["error"]:
        return ours
    return {"error": None, "gamma": ours["gamma"], "verify_width": ours["widths"]["target"]["target_verify"]}


@pytest.fixture(scope="module")
def parity(framework_env, model_dirs) -> dict[str, Any]:
    cases = grid(model_dirs)
    out = run_in_env(framework_env, str(HERE / "vllm_grid.py"), cases)
    registry = Registry.load()
    kinds = [
        difference(vllm_outcome(result), specreg_outcome(registry, case["spec"]), FIELDS)
        for case, result in zip(cases, out["results"], strict=True)
    ]
    return {"version": out["version"], "cases": cases, "kinds": kinds,
            "audit": audit("vllm", cases, kinds, load_table())}


def test_grid_is_large_enough_and_runs_the_tested_release(parity):
    assert parity["version"] == "0.33.0"
    assert len(parity["cases"]) >= 30


def test_every_difference_is_in_the_deviation_table(parity):
    report = parity["audit"]
    print(json.dumps({k: v for k, v in report.items() if k != "undocumented"}))
    assert not report["undocumented"], json.dumps(report["undocumented"][:5], indent=1)


def test_every_table_row_still_differs(parity):
    assert parity["audit"]["stale"] == []
