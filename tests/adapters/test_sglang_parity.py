"""SGLang 0.5.23 against specreg on the parity grid, case by case against the committed
snapshot and the deviation table (tests/adapters/parity.py builds the grid)."""

from __future__ import annotations

import importlib
from collections import Counter
from pathlib import Path

import pytest

from tests.adapters import deviation_pages, deviations
from specreg.adapters.common import outcome
from tests.adapters import parity

FRAMEWORK = "sglang"


@pytest.fixture(scope="module")
def fresh(parity_runs, parity_models):
    return parity.snapshot_from_run(FRAMEWORK, parity_runs[FRAMEWORK], parity_models)


@pytest.fixture(scope="module")
def committed():
    return deviations.load_snapshot(FRAMEWORK, parity.SNAPSHOTS)


def test_the_grid_runs_the_tested_release_and_spans_sglangs_rules(fresh):
    assert fresh["version"] == parity.VERSIONS[FRAMEWORK]
    cases = [e["case"] for e in fresh["cases"].values()]
    assert len(cases) >= parity.MIN_CASES[FRAMEWORK]
    conditions = [deviations.conditions_of(c) for c in cases]
    assert {c["topk"] for c in cases} == {None, 1, 2, 4, 8}
    assert {c["steps"] for c in cases} >= {None, *range(1, 9)}
    assert {c["algorithm"] for c in cases} == {
        "EAGLE", "EAGLE3", "NEXTN", "STANDALONE", "DSPARK", "DFLASH", "NGRAM", "UNO",
        "FROZEN_KV_MTP"}
    assert {c["target"] for c in cases} == {"llama", "qwen2", "qwen3", "dsa", "grok"}
    # draft tokens unset, 1, and below, at and above both a tree's nodes and a block
    for family in ("eagle", "block"):
        seen = {c["draft"] for c in conditions if c["family"] == family}
        assert seen >= {"unset", "one", "below", "at", "above"}, (family, seen)
    assert {c["checkpoint_block"] for c in conditions} == set(deviations.CONDITIONS[
        "checkpoint_block"][1])
    hisparse = [c for c in conditions if c["hisparse"]]
    for switch in ("radix_cache", "mixed_chunk", "adaptive", "hisparse_swap"):
        assert len({c[switch] for c in hisparse}) >= 2, switch


def test_every_case_is_as_the_snapshot_pins(fresh, committed):
    changed = parity.snapshot_diff(committed, fresh)
    assert not changed, "\n".join(changed[:40]) + (
        f"\n{len(changed)} changed lines; if the change is intended, regenerate: {parity.REGENERATE}")


def test_every_difference_is_one_row_and_every_row_holds_exactly(fresh):
    report = deviations.audit(FRAMEWORK, deviations.entries_of(fresh), deviations.load_table())
    print("\n".join(parity.report_lines({FRAMEWORK: fresh}, deviations.load_table())))
    found = deviations.failures(report)
    assert not found, f"{found}\nfix the rows in {deviations.TABLE}, then: {parity.REGENERATE}"


@pytest.mark.parametrize("mutation", parity.MUTATIONS, ids=[m[0] for m in parity.MUTATIONS])
def test_a_changed_rule_fails_naming_the_cases(mutation, fresh, committed, parity_models,
                                               monkeypatch):
    """Re-resolve specreg's side of the grid with one rule changed: the comparison with the
    snapshot fails and names the cases that moved."""
    _, module, name, value = mutation
    monkeypatch.setattr(importlib.import_module(module), name, value)
    cases = parity.cases_of(FRAMEWORK)
    theirs = [fresh["cases"][c["id"]]["framework"] for c in cases]
    ours = parity.specreg_side(parity.built_in_registry(), FRAMEWORK, cases, parity_models)
    mutated = parity.build_snapshot(FRAMEWORK, fresh["version"], cases, theirs, ours)
    changed = parity.snapshot_diff(committed, mutated)
    moved = [cid for cid in mutated["cases"] if mutated["cases"][cid] != committed["cases"][cid]]
    assert moved and all(any(repr(cid) in line for line in changed) for cid in moved)
    print(f"{mutation[0]}: {len(moved)} cases change, e.g. {moved[:3]}")


def test_enforce_mode_gives_specregs_values_on_the_whole_grid(parity_runs, parity_models, fresh):
    """With SPECREG_SGLANG=enforce, SGLang resolves every grid case to specreg's values and
    widths; where specreg refuses, SGLang raises specreg's coded ValueError. SGLang's own checks
    outside specreg's scope (attention backends, HiSparse model checks) may still refuse."""
    registry = parity.built_in_registry()
    root = next(iter(parity_models.values())).parent
    classes: Counter[str] = Counter()
    cases = parity.cases_of(FRAMEWORK)
    for case, result in zip(cases, parity_runs["sglang-enforce"]["results"], strict=True):
        ours = outcome(registry, parity.sglang_flags(case["facts"], parity_models))
        theirs = parity.sglang_outcome(result, root)
        alone = fresh["cases"][case["id"]]["framework"]
        if ours["error"]:
            assert theirs["error"] == "ConfigError", (case["id"], result)
            assert all(code in result["message"] for code in ours["error"]), (case["id"], result)
            classes["specreg refuses"] += 1
        elif theirs["error"] is None:
            assert deviations.difference(theirs, ours) == "same", (case["id"], result, ours)
            classes["rescued" if alone["error"] else "resolved"] += 1
        else:  # SGLang's own checks beyond the speculative numbers (e.g. attention backends)
            assert alone["error"] is not None, (case["id"], result)  # no new refusals
            assert theirs["refusal"] and "[SR" not in result["message"], (case["id"], result)
            classes["SGLang refuses"] += 1
    print(dict(classes))
    assert classes["rescued"] > 0


def test_deviation_docs_are_generated_from_the_table_and_snapshots():
    root = Path(__file__).resolve().parents[2]
    fix = "run `python -m tests.adapters.deviation_pages` to regenerate the pages"
    for path, text in deviation_pages.pages(root):
        assert path.read_text() == text, f"{path}: {fix}"
    rows = deviations.load_table()
    assert all(row["reason"].strip() for row in rows)
    assert len({row["id"] for row in rows}) == len(rows)


def test_unknown_adapter_mode_is_a_coded_error(monkeypatch):
    from specreg.adapters import sglang as adapter
    from specreg.errors import ConfigError

    monkeypatch.setenv("SPECREG_SGLANG", "sometimes")
    with pytest.raises(ConfigError) as info:
        adapter.load()
    assert info.value.codes == ("SR176",)
    monkeypatch.setenv("SPECREG_SGLANG", "off")
    assert adapter.load() is None  # off: returns before importing SGLang
