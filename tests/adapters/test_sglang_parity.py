"""SGLang 0.5.23 against specreg on a grid of speculative flag sets, in the pinned environment."""

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
UNSET = None
EAGLE_FAMILY = ("EAGLE", "EAGLE3", "NEXTN")
BLOCK = ("DSPARK", "DFLASH")
TARGETS = ("llama", "qwen2", "dsa")


def grid(models: dict[str, Path]) -> list[dict[str, Any]]:
    """>= 300 cases: every algorithm, set and unset values, HiSparse on and off, three targets."""
    cases = []
    for target, hisparse in itertools.product(TARGETS, (False, True)):
        for algo, steps, topk, draft in itertools.product(
            EAGLE_FAMILY, (UNSET, 1, 3), (UNSET, 1, 4), (UNSET, 1, 4, 8)
        ):
            cases.append(_case(models, algo, target, hisparse, steps, topk, draft, None))
        for algo, block, draft, steps in itertools.product(BLOCK, (UNSET, 3), (UNSET, 1, 4, 8), (UNSET, 2)):
            cases.append(_case(models, algo, target, hisparse, steps, steps, draft, block))
        for block, draft in itertools.product((UNSET, 3), (UNSET, 1, 4, 6, 8)):
            cases.append(_case(models, "DSPARK", target, hisparse, None, None, draft, block,
                               checkpoint="dspark-draft-prefixed"))
    for i, case in enumerate(cases):
        case["id"] = i
    return cases


def _case(models, algo, target, hisparse, steps, topk, draft, block, checkpoint=None) -> dict[str, Any]:
    flags: dict[str, Any] = {"model_path": str(models[target]), "speculative_algorithm": algo}
    for key, value in (("speculative_num_steps", steps), ("speculative_eagle_topk", topk),
                       ("speculative_num_draft_tokens", draft)):
        if value is not None:
            flags[key] = value
    if algo in BLOCK:
        checkpoint = checkpoint or f"{algo.lower()}-draft"
        flags["speculative_draft_model_path"] = str(models[checkpoint])
        if block is not None:
            flags[f"speculative_{algo.lower()}_block_size"] = block
    if hisparse:
        flags.update(enable_hisparse=True, disable_radix_cache=True)
    return {
        "algorithm": algo, "target": target, "hisparse": hisparse,
        "steps_set": steps is not None, "topk_set": topk is not None, "draft_set": draft is not None,
        "block_set": block is not None, "topk": topk, "draft": draft, "flags": flags,
        "checkpoint": checkpoint,
        "kwargs": {**flags, "device": "cuda"}, "check": hisparse,
    }


def sglang_outcome(result: dict[str, Any]) -> dict[str, Any]:
    if result["error"]:
        return {"error": result["error"]}
    values = result["values"]
    draft = values["speculative_num_draft_tokens"]
    return {
        "error": None,
        "values": {"num_steps": values["speculative_num_steps"], "topk": values["speculative_eagle_topk"],
                   "num_draft_tokens": draft},
        "gamma": None if draft is None else draft - 1,
        "widths": result["widths"],
    }


@pytest.fixture(scope="module")
def parity(framework_env, model_dirs) -> dict[str, Any]:
    cases = grid(model_dirs)
    out = run_in_env(framework_env, str(HERE / "sglang_grid.py"), cases)
    registry = Registry.load()
    kinds = []
    for case, result in zip(cases, out["results"], strict=True):
        kinds.append(difference(sglang_outcome(result), outcome(registry, dict(case["flags"]))))
    return {"version": out["version"], "cases": cases, "kinds": kinds, "results": out["results"],
            "audit": audit("sglang", cases, kinds, load_table())}


def test_grid_is_large_enough_and_runs_the_tested_release(parity):
    assert parity["version"] == "0.5.23"
    assert len(parity["cases"]) >= 300


def test_every_difference_is_in_the_deviation_table(parity):
    report = parity["audit"]
    print(json.dumps({k: v for k, v in report.items() if k != "undocumented"}))
    undocumented = report["undocumented"]
    assert not undocumented, json.dumps(undocumented[:5], indent=1, default=str) + f"\n{len(undocumented)} undocumented"


def test_every_table_row_still_differs(parity):
    assert parity["audit"]["stale"] == []


def test_unknown_adapter_mode_is_a_coded_error(monkeypatch):
    from specreg.adapters import sglang as adapter
    from specreg.errors import ConfigError

    monkeypatch.setenv("SPECREG_SGLANG", "sometimes")
    with pytest.raises(ConfigError) as info:
        adapter.load()
    assert info.value.codes == ("SR176",)
    monkeypatch.setenv("SPECREG_SGLANG", "off")
    assert adapter.load() is None  # off: returns before importing SGLang


def test_deviation_docs_are_generated_from_the_table():
    from specreg.adapters.deviations import DOCS_PAGE, FRAMEWORK_PAGES, embed, render

    root = Path(__file__).resolve().parents[2]
    rows = load_table()
    fix = "run `python -m specreg.adapters.deviations` to regenerate the pages"
    assert (root / DOCS_PAGE).read_text() == render(rows), fix
    for framework, page in FRAMEWORK_PAGES.items():
        text = (root / page).read_text()
        assert text == embed(text, rows, framework), fix
        assert all(row["id"] in text for row in rows if row["framework"] == framework)
    assert all(row["reason"].strip() for row in rows)
    assert len({row["id"] for row in rows}) == len(rows)


def test_enforce_mode_gives_specregs_values_on_the_whole_grid(framework_env, parity):
    """With SPECREG_SGLANG=enforce, SGLang resolves every grid case to specreg's values and
    widths; where specreg refuses, SGLang raises specreg's coded ValueError. SGLang's own checks
    outside specreg's scope (attention backends, HiSparse model checks) may still refuse."""
    cases = parity["cases"]
    out = run_in_env(framework_env, str(HERE / "sglang_grid.py"), cases, args=("--load-plugins",),
                     SPECREG_SGLANG="enforce")
    registry = Registry.load()
    rescued = 0
    for case, result, alone in zip(cases, out["results"], parity["results"], strict=True):
        ours = outcome(registry, dict(case["flags"]))
        theirs = sglang_outcome(result)
        if ours["error"]:
            assert theirs["error"] == "ConfigError", (case["flags"], result)
            assert all(code in result["message"] for code in ours["error"]), (case["flags"], result)
        elif theirs["error"] is None:
            assert difference(theirs, ours) is None, (case["flags"], result, ours)
            rescued += alone["error"] is not None
        else:  # SGLang's own checks beyond the speculative numbers (e.g. attention backends)
            assert alone["error"] is not None, (case["flags"], result)  # no new refusals
            assert theirs["error"] == "ValueError" and "[SR" not in result["message"], result
    assert rescued > 0
