"""The committed table of where specreg deliberately differs from SGLang and vLLM, and its docs page.

Each row of `deviations.json` names a framework, the algorithms and case conditions it covers,
the kind of difference (see `difference`) and one reason. The parity tests in tests/adapters/
fail on a difference no row covers and on a row that covers no difference; the page
docs/frameworks/deviations.md is rendered from the table (`python -m specreg.adapters.deviations`).
"""

from __future__ import annotations

import json
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

TABLE = Path(__file__).with_name("deviations.json")
DOCS_PAGE = Path("docs") / "frameworks" / "deviations.md"
#: Framework pages that embed their own table between these markers.
FRAMEWORK_PAGES = {
    "sglang": Path("docs") / "frameworks" / "sglang.md",
    "vllm": Path("docs") / "frameworks" / "vllm.md",
}
BEGIN, END = "<!-- deviations:begin (generated) -->", "<!-- deviations:end -->"
NAMES = {"sglang": "SGLang", "vllm": "vLLM"}
COMPARED = ("num_steps", "topk", "num_draft_tokens", "gamma", "widths")


def load_table(path: Path = TABLE) -> list[dict[str, Any]]:
    return list(json.loads(path.read_text())["rows"])


def difference(
    framework: Mapping[str, Any], ours: Mapping[str, Any], fields: Sequence[str] = COMPARED
) -> str | None:
    """None when both agree (same values, or both refuse); else the kind of difference.

    Kinds: `framework-error:<Exception>` (the framework raised, specreg resolved),
    `specreg-error:<codes>` (specreg refused what the framework accepted) and
    `values:<fields>` (both resolved, to different values).
    """
    theirs_err, ours_err = framework.get("error"), ours.get("error")
    if theirs_err and ours_err:
        return None
    if theirs_err:
        return f"framework-error:{theirs_err}"
    if ours_err:
        return "specreg-error:" + ",".join(ours_err)
    differing = [name for name in fields if _value(framework, name) != _value(ours, name)]
    return "values:" + ",".join(differing) if differing else None


def _value(outcome: Mapping[str, Any], name: str) -> Any:
    if name in outcome:
        return outcome[name]
    return (outcome.get("values") or {}).get(name)


def matches(row: Mapping[str, Any], case: Mapping[str, Any], kind: str) -> bool:
    """Whether `row` covers a case whose difference is `kind`."""
    if row["kind"] != kind:
        return False
    for key, accepted in row.get("when", {}).items():
        if case.get(key) not in accepted:
            return False
    return True


def audit(
    framework: str, cases: Sequence[Mapping[str, Any]], kinds: Sequence[str | None], rows: Sequence[Mapping[str, Any]]
) -> dict[str, Any]:
    """Counts of agreeing and documented cases, the undocumented ones, and rows nothing matched."""
    mine = [r for r in rows if r["framework"] == framework]
    used: set[str] = set()
    agree, documented, undocumented = 0, 0, []
    for case, kind in zip(cases, kinds, strict=True):
        if kind is None:
            agree += 1
            continue
        hits = [r["id"] for r in mine if matches(r, case, kind)]
        if hits:
            documented += 1
            used.update(hits)
        else:
            undocumented.append({"case": dict(case), "kind": kind})
    stale = [r["id"] for r in mine if r["id"] not in used]
    return {"agree": agree, "documented": documented, "undocumented": undocumented, "stale": stale}


def render(rows: Sequence[Mapping[str, Any]]) -> str:
    lines = [
        "# Where specreg differs from SGLang and vLLM",
        "",
        "<!-- generated from specreg/adapters/deviations.json by "
        "`python -m specreg.adapters.deviations`; do not edit -->",
        "",
        "The parity tests resolve a grid of speculative configurations through the installed "
        "framework and through specreg and compare steps, topk, draft tokens, gamma and every "
        "phase width on the target and draft worker. Every difference is one of the rows below; "
        "a new difference, or a row that no longer differs, fails the tests. In enforce mode "
        "the adapters use specreg's side.",
        "",
    ]
    for framework in NAMES:
        lines += [f"## {NAMES[framework]}", "", *table(rows, framework), ""]
    return "\n".join(lines)


def table(rows: Sequence[Mapping[str, Any]], framework: str) -> list[str]:
    """One framework's rows as a Markdown table."""
    lines = ["| id | cases | framework does | specreg does | reason |", "| --- | --- | --- | --- | --- |"]
    for r in rows:
        if r["framework"] != framework:
            continue
        when = "; ".join(f"{k} in {', '.join(map(str, v))}" for k, v in r.get("when", {}).items())
        lines.append(
            f"| {r['id']} | {when or 'all'} | {r['framework_does']} | {r['specreg_does']} | {r['reason']} |"
        )
    return lines


def embed(page: str, rows: Sequence[Mapping[str, Any]], framework: str) -> str:
    """`page` with its generated table (between BEGIN and END) rendered from `rows`."""
    head, _, rest = page.partition(BEGIN)
    _, _, tail = rest.partition(END)
    return "\n".join([head + BEGIN, *table(rows, framework), END]) + tail


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    out = Path(args[0]) if args else DOCS_PAGE
    out.parent.mkdir(parents=True, exist_ok=True)
    rows = load_table()
    out.write_text(render(rows))
    for framework, page in FRAMEWORK_PAGES.items():
        page.write_text(embed(page.read_text(), rows, framework))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
