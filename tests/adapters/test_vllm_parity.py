"""vLLM 0.33.0 against specreg on the parity grid of speculative-config dicts, case by case
against the committed snapshot and the deviation table (tests/adapters/parity.py)."""

from __future__ import annotations

import importlib

import pytest

from tests.adapters import deviations
from tests.adapters import parity

FRAMEWORK = "vllm"


@pytest.fixture(scope="module")
def fresh(parity_runs, parity_models):
    return parity.snapshot_from_run(FRAMEWORK, parity_runs[FRAMEWORK], parity_models)


@pytest.fixture(scope="module")
def committed():
    return deviations.load_snapshot(FRAMEWORK, parity.SNAPSHOTS)


def test_the_grid_runs_the_tested_release_and_every_method(fresh):
    assert fresh["version"] == parity.VERSIONS[FRAMEWORK]
    cases = [e["case"] for e in fresh["cases"].values()]
    assert len(cases) >= parity.MIN_CASES[FRAMEWORK]
    methods = {c["algorithm"] for c in cases}
    assert methods >= {"eagle", "eagle3", "mtp", "dspark", "dflash", "ngram", "draft_model",
                       "suffix", "custom_class"}
    block = [deviations.conditions_of(c) for c in cases if c["algorithm"] in ("dspark", "dflash")]
    assert {c["draft"] for c in block} >= {"unset", "below", "at", "above"}  # k >= 1: never one


def test_every_case_is_as_the_snapshot_pins(fresh, committed):
    changed = parity.snapshot_diff(committed, fresh)
    assert not changed, "\n".join(changed[:40]) + (
        f"\n{len(changed)} changed lines; if the change is intended, regenerate: {parity.REGENERATE}")


def test_every_difference_is_one_row_and_every_row_holds_exactly(fresh):
    report = deviations.audit(FRAMEWORK, deviations.entries_of(fresh), deviations.load_table())
    print("\n".join(parity.report_lines({FRAMEWORK: fresh}, deviations.load_table())))
    found = deviations.failures(report)
    assert not found, f"{found}\nfix the rows in {deviations.TABLE}, then: {parity.REGENERATE}"


def test_eagles_default_steps_changed_fails_naming_the_cases(fresh, committed, parity_models,
                                                             monkeypatch):
    """vLLM refuses EAGLE without k, so the audit's class does not move, but specreg's filled k
    does, and the snapshot names each case."""
    _, module, name, value = parity.MUTATIONS[0]
    monkeypatch.setattr(importlib.import_module(module), name, value)
    cases = parity.cases_of(FRAMEWORK)
    theirs = [fresh["cases"][c["id"]]["framework"] for c in cases]
    ours = parity.specreg_side(parity.built_in_registry(), FRAMEWORK, cases, parity_models)
    mutated = parity.build_snapshot(FRAMEWORK, fresh["version"], cases, theirs, ours)
    changed = parity.snapshot_diff(committed, mutated)
    moved = [cid for cid in mutated["cases"] if mutated["cases"][cid] != committed["cases"][cid]]
    assert moved and all(any(repr(cid) in line for line in changed) for cid in moved)
    assert all(cid.startswith(("eagle ", "eagle3 ", "mtp ", "deepseek_mtp ")) for cid in moved), moved
