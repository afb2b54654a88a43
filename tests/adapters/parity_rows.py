"""Proposes deviation-table conditions for the differences no row covers yet: for each uncovered
kind, the smallest set of semantic conditions (`deviations.CONDITIONS`) that holds for exactly
its cases, split into several rows where one cannot.

    python -m tests.adapters.parity_rows [sglang|vllm]

It reads the committed snapshots and prints JSON rows whose texts (`framework_does`,
`specreg_does`, `reason`) a person writes; a row is only ever added to deviations.json by hand.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from typing import Any

from tests.adapters import deviations
from tests.adapters.parity import SNAPSHOTS


def _box(cases: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    return {name: sorted({c[name] for c in cases}, key=str) for name in deviations.CONDITIONS}


def _selects(when: Mapping[str, Sequence[Any]], values: Mapping[str, Any]) -> bool:
    """Whether condition values `values` (of one case) satisfy `when`."""
    return all(values[name] in accepted for name, accepted in when.items())


def _minimal(when: dict[str, list[Any]], others: Sequence[Mapping[str, Any]]) -> dict[str, list[Any]]:
    """Drop every condition whose removal lets no case of another kind in."""
    for name in list(when):
        trial = {k: v for k, v in when.items() if k != name}
        if trial and not any(_selects(trial, c) for c in others):
            when = trial
    return when


def propose(kind_cases: Sequence[Mapping[str, Any]], others: Sequence[Mapping[str, Any]],
            depth: int = 0) -> list[dict[str, list[Any]]]:
    """Condition sets that together select exactly `kind_cases` out of `kind_cases + others`."""
    box = _box(kind_cases)
    if not any(_selects(box, c) for c in others):
        return [_minimal(box, others)]
    if depth > 4:
        return []
    best = None
    for name, values in box.items():
        if len(values) < 2:
            continue
        parts = {v: [c for c in kind_cases if c[name] == v] for v in values}
        impure = sum(any(_selects(_box(p), o) for o in others) for p in parts.values())
        if best is None or impure < best[0]:
            best = (impure, name, parts)
    if best is None:
        return []
    return [w for part in best[2].values() for w in propose(part, others, depth + 1)]


def proposals(framework: str) -> list[dict[str, Any]]:
    snapshot = deviations.load_snapshot(framework, SNAPSHOTS)
    entries = deviations.entries_of(snapshot)
    report = deviations.audit(framework, entries, deviations.load_table())
    uncovered = {u["case"] for u in report["undocumented"]}
    values = {e["id"]: deviations.conditions_of(e["case"]) for e in entries}
    rows = []
    for kind in sorted({e["kind"] for e in entries if e["id"] in uncovered}):
        mine = [values[e["id"]] for e in entries if e["kind"] == kind and e["id"] in uncovered]
        others = [values[e["id"]] for e in entries if e["kind"] != kind]
        whens = []
        for when in propose(mine, others):
            if when not in whens:
                whens.append(when)
        for when in whens:
            count = sum(_selects(when, c) for c in mine)
            rows.append({"id": "?", "framework": framework, "kind": kind, "when": when,
                         "cases": count, "framework_does": "?", "specreg_does": "?", "reason": "?"})
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv) or ["sglang", "vllm"]
    for framework in args:
        for row in proposals(framework):
            print(json.dumps(row))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
