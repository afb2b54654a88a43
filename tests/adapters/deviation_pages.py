"""The docs pages of the deviation table: docs/frameworks/deviations.md, rendered from
tests/adapters/deviations.json and the parity snapshots, and each framework page's own table
between its markers (`python -m tests.adapters.deviation_pages [ROOT]` writes them)."""

from __future__ import annotations

import sys
from collections.abc import Iterable, Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.adapters.deviations import (
    CONDITIONS,
    NAMES,
    SNAPSHOT_DIR,
    audit,
    entries_of,
    kinds_of,
    load_snapshot,
    load_table,
    summary,
)

DOCS_PAGE = Path("docs") / "frameworks" / "deviations.md"
#: Framework pages that embed their own table between these markers.
FRAMEWORK_PAGES = {
    "sglang": Path("docs") / "frameworks" / "sglang.md",
    "vllm": Path("docs") / "frameworks" / "vllm.md",
}
BEGIN, END = "<!-- deviations:begin (generated) -->", "<!-- deviations:end -->"

def render(rows: Sequence[Mapping[str, Any]], snapshots: Mapping[str, Mapping[str, Any]]) -> str:
    lines = [
        "# Where specreg differs from SGLang and vLLM",
        "",
        "<!-- generated from tests/adapters/deviations.json and tests/adapters/snapshots by "
        "`python -m tests.adapters.deviation_pages`; do not edit -->",
        "",
        "The parity tests resolve a grid of speculative configurations through the installed "
        "framework (adapter off) and through specreg, and compare steps, topk, draft tokens, "
        "gamma and every phase width on the target and draft worker (vLLM: k and the verify "
        "width). Each case falls in one class: same values; both refuse (each side's cause is "
        "pinned in the snapshot); rescued (the framework crashes with an exception that is not "
        "a ValueError, specreg resolves or refuses with a code); specreg stricter; specreg "
        "looser (the framework refuses with a ValueError); values differ. Every case's outcome "
        "on both sides is committed in tests/adapters/snapshots/, and every difference is one "
        "of the rows below, which state the conditions they cover and how many cases; a changed "
        "case, a new difference, a row that no longer differs or that also holds for another "
        "kind of case fails the tests. In enforce mode the adapters use specreg's side.",
        "",
        "## Conditions",
        "",
        "| condition | values | meaning |",
        "| --- | --- | --- |",
        *(f"| {name} | {', '.join(map(str, domain))} | {meaning} |"
          for name, (_, domain, meaning) in CONDITIONS.items()),
        "",
    ]
    for framework in NAMES:
        lines += [f"## {NAMES[framework]}", ""]
        snapshot = snapshots.get(framework)
        if snapshot is not None:
            report = audit(framework, entries_of(snapshot), rows)
            lines += [
                f"{NAMES[framework]} {snapshot['version']}, {report['cases']} cases:",
                "",
                "| " + " | ".join(summary(report)) + " |",
                "| " + " | ".join("---" for _ in summary(report)) + " |",
                "| " + " | ".join(str(v) for v in summary(report).values()) + " |",
                "",
            ]
        lines += [*table(rows, framework), ""]
    return "\n".join(lines)


def _when(row: Mapping[str, Any]) -> str:
    return "; ".join(f"{k}: {', '.join(map(str, v))}" for k, v in row.get("when", {}).items())


def table(rows: Sequence[Mapping[str, Any]], framework: str) -> list[str]:
    """One framework's rows as a Markdown table."""
    lines = ["| id | kind | conditions | cases | framework does | specreg does | reason |",
             "| --- | --- | --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["framework"] != framework:
            continue
        lines.append(
            f"| {r['id']} | {', '.join(f'`{k}`' for k in kinds_of(r))} | {_when(r)} | {r.get('cases')} | {r['framework_does']} "
            f"| {r['specreg_does']} | {r['reason']} |"
        )
    return lines


def embed(page: str, rows: Sequence[Mapping[str, Any]], framework: str) -> str:
    """`page` with its generated table (between BEGIN and END) rendered from `rows`."""
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return "\n".join([head + BEGIN, *table(rows, framework), END]) + tail


def pages(root: Path = Path()) -> Iterable[tuple[Path, str]]:
    """Every generated page under `root` and the text it must hold."""
    rows = load_table()
    snapshots = {f: s for f in NAMES if (s := load_snapshot(f, root / SNAPSHOT_DIR)) is not None}
    yield root / DOCS_PAGE, render(rows, snapshots)
    for framework, page in FRAMEWORK_PAGES.items():
        yield root / page, embed((root / page).read_text(), rows, framework)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    root = Path(args[0]) if args else Path()
    for path, text in list(pages(root)):
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
