"""Run every CPU benchmark at the target sizes, keep the raw output, and plot the ratios.

    python benchmarks/run_cpu.py            # writes benchmarks/results/cpu-latest.{txt,json},
                                            # docs/img/benchmarks.png and the results tables of
                                            # docs/benchmarks.md

Each ratio compares two paths measured in the same run of the same script on this machine, so
ratios from different scripts or runs are not comparable in absolute time. Run on a quiet machine.

Besides the ratios against a naive loop or a baseline, every `FLOOR` line a script prints (see
benchmarks/floors.py) becomes a row: the kernel's time as a multiple of the floor of the same
work (one read of the bytes it must read, or one index_copy_ of the rows it must copy), and every
`PEER` line (bench_peers.py) a row of specreg's time over a framework's own code for the same job
(target <= 1.0; an absent peer is a row that says why). Every row belongs to one job
(`JOBS`: verification, sampling filters and parameters, drafters, HiSparse swap, resolution);
the run prints each figure with its target and whether it is met, and the load average at the
start and the end, and writes one table per job into docs/benchmarks.md between the markers
`RESULTS_BEGIN` and `RESULTS_END`.
"""

from __future__ import annotations

import json
import os
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from floors import BOUND_LINE, FLOOR_LINE, PEER_LINE, TRAFFIC_LINE  # noqa: E402

RESULTS = ROOT / "benchmarks" / "results"
FIGURE = ROOT / "docs" / "img" / "benchmarks.png"
PAGE = ROOT / "docs" / "benchmarks.md"
RESULTS_BEGIN = "<!-- results: written by benchmarks/run_cpu.py from its last run; do not edit -->"
RESULTS_END = "<!-- end of the results written by benchmarks/run_cpu.py -->"

#: The jobs the results are grouped by, in the page's order.
JOBS = ("verification", "sampling filters and parameters", "drafters", "HiSparse swap",
        "resolution")
#: Each benchmark's job (rows of `bench_peers.py` and EAGLE's build_tree go by their label).
RUN_JOBS = {
    "plan": "resolution", "chain": "verification", "eagle": "verification",
    "dspark": "drafters", "hisparse": "HiSparse swap", "logprobs": "verification",
    "draft-lengths": "verification", "sglang-hisparse": "HiSparse swap",
    "sampling-params": "sampling filters and parameters",
    "filter": "sampling filters and parameters",
    "grammar-masks": "sampling filters and parameters",
    "penalties": "sampling filters and parameters", "traffic": "verification",
    "peers": "sampling filters and parameters", "real-text": "drafters",
}


def job_of(benchmark: str, label: str) -> str:
    if "build_tree" in label or "ngram" in label or "suffix" in label:
        return "drafters"
    return RUN_JOBS[benchmark]

# (label, command, regex whose first group is the ratio, "higher"/"lower" is better, target)
RUNS: list[tuple[str, list[str], list[tuple[str, str, str, float | None]]]] = [
    (
        "plan",
        ["benchmarks/bench_plan.py", "--repeat", "7", "--number", "200000"],
        [("plan.num_tokens_per_req / direct call", r"plan / direct = ([\d.]+)x", "lower", 1.5)],
    ),
    (
        "chain",
        ["benchmarks/bench_chain_verify.py", "--threads", "1", "--profile"],
        [
            ("chain greedy verify vs naive loop", r"greedy .*speed-up x([\d.]+)", "higher", 1.0),
            ("chain sampling verify vs naive loop", r"sampling .*speed-up x([\d.]+)", "higher", None),
            ("chain sampling, CPU value checks on (the default) / off",
             r"checks cost x([\d.]+) of the unchecked call", "lower", 1.2),
        ],
    ),
    (
        "eagle",
        ["benchmarks/bench_eagle_cpu.py", "--target-sizes", "--threads", "1", "--profile"],
        [
            ("EAGLE build_tree vs naive loop", r"build_tree .*ratio\s+([\d.]+)x", "higher", 20.0),
            ("EAGLE tree greedy verify vs naive loop", r"greedy verify .*ratio\s+([\d.]+)x", "higher", 20.0),
            ("EAGLE tree sampling verify vs naive loop", r"sampling verify torch.*ratio\s+([\d.]+)x", "higher", 20.0),
        ],
    ),
    (
        "dspark",
        ["benchmarks/bench_dspark_markov.py", "--vocab", "131072", "--batch", "1", "16", "64",
         "--threads", "1", "--profile"],
        [("DSpark fused Markov step (torch) vs two-step, b=64", r"^\s+64\s+[\d.]+\s+[\d.]+\s+([\d.]+)", "higher", None)],
    ),
    (
        "hisparse",
        ["benchmarks/bench_hisparse.py", "--full", "--profile"],
        [
            ("HiSparse swap (torch) vs naive reference", r"-> ([\d.]+)x \(target >= 30x\)", "higher", 30.0),
            ("HiSparse planned copy / index_copy_ bandwidth (%)", r"-> (\d+)% \(target >= 50%\)", "higher", 50.0),
            ("HiSparse 4 steps in one call vs 4 calls (time)", r"\(([\d.]+)x\); resolving", "higher", None),
        ],
    ),
    (
        "logprobs",
        ["benchmarks/bench_logprobs.py", "--threads", "1"],
        [("emitted logprobs: (verify + logprobs) / verify", r"^logprobs\s+[\d.]+ ms .*x\s*([\d.]+)", "lower", 1.1)],
    ),
    (
        "draft-lengths",
        ["benchmarks/bench_draft_lengths.py"],
        [
            ("chain sampling, mixed draft lengths / padded to the longest",
             r"RATIO chain sampling \(torch\): mixed / padded = ([\d.]+)x", "lower", 1.0),
            ("tree sampling, mixed draft lengths / padded to the longest",
             r"RATIO tree sampling \(torch\): mixed / padded = ([\d.]+)x", "lower", 1.0),
        ],
    ),
    (
        "sglang-hisparse",
        ["benchmarks/bench_sglang_hisparse.py", "--calls", "60"],
        [
            ("SGLang HiSparse swap under hisparse_swap / specreg's swapper, 4 steps",
             r"^\s+4\s+.*substituted / direct = ([\d.]+)x", "lower", 1.05),
            ("SGLang HiSparse swap under hisparse_swap / specreg's swapper, 8 steps",
             r"^\s+8\s+.*substituted / direct = ([\d.]+)x", "lower", 1.05),
        ],
    ),
    (
        "sampling-params",
        ["benchmarks/bench_sampling_params.py", "--threads", "1"],
        [
            ("sampling parameters, mixed batch / the same verify without them",
             r"^mixed\s+params .*?x\s*([\d.]+)", "lower", None),
            ("sampling parameters, every draft accepted / the same verify without them",
             r"^all accepted\s+params .*?x\s*([\d.]+)", "lower", 1.3),
        ],
    ),
    ("filter", ["benchmarks/bench_filter.py", "--threads", "1"], []),
    (
        "grammar-masks",
        ["benchmarks/bench_grammar_masks.py", "--threads", "1"],
        [
            ("grammar mask: masked verify / the same verify without a mask",
             r"masked / plain x\s*([\d.]+)", "lower", 1.2),
            ("grammar mask alone / one add_ pass of ready values",
             r"^mask alone .*x\s*([\d.]+)$", "lower", None),
        ],
    ),
    (
        "penalties",
        ["benchmarks/bench_penalties.py", "--threads", "1"],
        [("penalties: penalised verify / the same verify without them",
          r"penalised / plain x\s*([\d.]+)", "lower", 1.3)],
    ),
    ("traffic", ["benchmarks/bench_traffic.py"], []),
    ("peers", ["benchmarks/bench_peers.py", "--numba"], []),
    (
        "real-text",
        ["benchmarks/bench_real_text.py", "--files", "24", "--ks", "2,4,8,16"],
        [
            ("suffix chain accepted length, specreg / arctic-inference (k=16)",
             r"^suffix chain: specreg/arctic accepted length .*k=16: ([\d.]+);", "higher", 1.0),
        ],
    ),
]


#: The multiples of the floor to reach on CPU (one thread, the sizes run here).
FLOOR_TARGETS = {
    "chain greedy verify": 1.5,
    "chain greedy verify, whole logits": 1.5,
    "chain sampling verify": 3.0,
    "EAGLE tree greedy verify": 1.5,
    "EAGLE tree greedy verify, whole logits": 1.5,
    "EAGLE tree sampling verify": 3.0,
    "EAGLE tree sampling verify with q": 5.0,
    "HiSparse swap": 2.0,
    "HiSparse swap vs a cold copy": 2.0,
    "DSpark fused Markov step (torch), b=64": 3.0,
}


def floor_rows(name: str, output: str) -> list[dict[str, object]]:
    """One row per FLOOR line of a script's output."""
    return [
        {
            "benchmark": name,
            "label": f"{m['name']} / floor",
            "value": float(m["multiple"]),
            "better": "lower",
            "target": FLOOR_TARGETS.get(m["name"]),
            "kernel_ms": float(m["kernel"]),
            "floor_ms": float(m["floor"]),
            "floor": m["what"],
        }
        for m in FLOOR_LINE.finditer(output)
    ]


#: A verify kernel loads at most this multiple of the bytes its rule must read.
TRAFFIC_TARGET = 1.1


def traffic_rows(name: str, output: str) -> list[dict[str, object]]:
    """One row per TRAFFIC line (bench_traffic.py): bytes loaded as a multiple of the rule's."""
    return [
        {
            "benchmark": name,
            "label": f"{m['name']} / bytes the rule reads (interpreter)",
            "value": float(m["multiple"]),
            "better": "lower",
            "target": TRAFFIC_TARGET,
            "loaded_bytes": int(m["loaded"]),
            "distinct_bytes": int(m["distinct"]),
            "rule_bytes": int(m["rule"]),
        }
        for m in TRAFFIC_LINE.finditer(output)
    ]


#: specreg's time over a framework's own code for the same job.
PEER_TARGET = 1.0


def peer_rows(name: str, output: str) -> list[dict[str, object]]:
    """One row per PEER line (bench_peers.py): specreg's time over the peer's, or, for an absent
    peer, no value and why; a BOUND line's text goes with its row."""
    bounds = {m["name"]: m["bound"] for m in BOUND_LINE.finditer(output)}
    rows: list[dict[str, object]] = []
    for m in PEER_LINE.finditer(output):
        row: dict[str, object] = {"benchmark": name, "label": m["name"], "better": "lower",
                                  "target": PEER_TARGET}
        if m["absent"] is not None:
            row.update(value=None, absent=m["absent"], peer_ms=None)
        else:
            ours, theirs = float(m["ours"]), float(m["theirs"])
            row.update(value=ours / theirs, specreg_ms=ours, peer_ms=theirs, peer=m["peer"],
                       what=m["what"])
        if m["name"] in bounds:
            row["bound"] = bounds[m["name"]]
        rows.append(row)
    return rows


def met(row: dict[str, Any]) -> bool | None:
    """Whether a row meets its target (None: no target, or no value)."""
    if row["target"] is None or row["value"] is None:
        return None
    if row["better"] == "lower":
        return row["value"] <= row["target"]
    return row["value"] >= row["target"]


def kind_of(row: dict[str, Any]) -> str:
    if "floor_ms" in row:
        return "floor multiple"
    if "rule_bytes" in row:
        return "bytes multiple"
    if "peer_ms" in row:
        return "peer ratio"
    return "ratio"


def load_average() -> list[float]:
    return [round(x, 2) for x in os.getloadavg()]


def rows_of(name: str, command: list[str], patterns: list[tuple[str, str, str, float | None]],
            output: str) -> list[dict[str, Any]]:
    """Every row of one script's output: its patterns' ratios, FLOOR, TRAFFIC and PEER lines,
    each with its job, kind and whether it met its target."""
    rows: list[dict[str, Any]] = []
    for label, pattern, better, target in patterns:
        match = re.search(pattern, output, flags=re.MULTILINE)
        row: dict[str, Any] = {"benchmark": name, "label": label, "better": better,
                               "target": target,
                               "value": float(match.group(1)) if match else None}
        if match is None:
            row["absent"] = (f"{command[0]} printed no line matching its pattern (its output: "
                             "benchmarks/results/cpu-latest.txt)")
        rows.append(row)
    rows += floor_rows(name, output) + traffic_rows(name, output) + peer_rows(name, output)
    for row in rows:
        row["job"] = job_of(name, str(row["label"]))
        row["kind"] = kind_of(row)
        row["met"] = met(row)
    return rows


def run_all() -> dict[str, Any]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    raw: list[str] = []
    ratios: list[dict[str, object]] = []
    load_start = load_average()
    for name, command, patterns in RUNS:
        started = time.perf_counter()
        proc = subprocess.run(
            [sys.executable, *command], cwd=ROOT, capture_output=True, text=True, check=False
        )
        output = "\n".join(
            line for line in proc.stdout.splitlines() if not line.startswith("USDT:")
        )
        raw.append(f"$ python {' '.join(command)}  ({time.perf_counter() - started:.0f} s)\n{output}")
        if proc.returncode != 0:
            raw.append(proc.stderr)
        ratios.extend(rows_of(name, command, patterns, output))
    data = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}",
        "cpus": os.cpu_count(),
        "load_average_start": load_start,
        "load_average_end": load_average(),
        "ratios": ratios,
    }
    raw.insert(0, f"load average (1, 5, 15 min) at the start {load_start}, "
                  f"at the end {data['load_average_end']}; {os.cpu_count()} CPUs")
    (RESULTS / "cpu-latest.txt").write_text("\n\n".join(raw) + "\n", encoding="utf-8")
    (RESULTS / "cpu-latest.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data


def chart_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The speed ratios (against a naive loop or a baseline), for the chart's first panel; a
    percentage (the planned copy's share of index_copy_ bandwidth) is drawn as the ratio it is
    (50% -> 0.5), with its target. Multiples of a floor and peer ratios have panels of their own."""
    rows = []
    for r in data["ratios"]:
        if r["value"] is None or "floor_ms" in r or "rule_bytes" in r or "peer_ms" in r:
            continue
        if "%" in r["label"]:
            target = None if r["target"] is None else r["target"] / 100
            r = {**r, "label": r["label"].replace(" (%)", " (ratio)"), "value": r["value"] / 100,
                 "target": target}
        rows.append(r)
    return rows


def _wrapped(label: str, width: int = 50) -> str:
    import textwrap

    return "\n".join(textwrap.wrap(label, width)) or label


def plot(data: dict[str, Any]) -> None:
    """Three panels: ratios against a naive loop or baseline (higher is better; the planned
    copy's bandwidth as a fraction of index_copy_'s), multiples of the floor, and specreg's time
    over a framework's own code (both lower is better). Long labels wrap; each panel is as tall
    as its wrapped lines."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    order = {job: i for i, job in enumerate(JOBS)}
    measured = sorted((r for r in data["ratios"] if r["value"] is not None),
                      key=lambda r: order.get(r.get("job"), len(JOBS)))  # job by job
    speed = sorted(chart_rows(data), key=lambda r: order.get(r.get("job"), len(JOBS)))
    floors = [r for r in measured if "floor_ms" in r or "rule_bytes" in r]
    peers = [r for r in measured if "peer_ms" in r]
    panels = [(rows, title) for rows, title in (
        (speed, "ratio vs a naive loop / baseline (higher is better)"),
        (floors, "time (or interpreter bytes) as a multiple of the floor (lower is better)"),
        (peers, "specreg's time / the framework's own code, same job (lower is better)"),
    ) if rows]
    lines = [sum(_wrapped(r["label"]).count("\n") + 1 for r in rows) for rows, _ in panels]
    fig, axes = plt.subplots(len(panels), 1, figsize=(11, 0.2 * sum(lines) + 1.4 * len(panels)),
                             gridspec_kw={"height_ratios": lines}, squeeze=False,
                             layout="constrained")
    for ax, (rows, title) in zip(axes[:, 0], panels, strict=True):
        ax.barh([_wrapped(r["label"]) for r in rows], [r["value"] for r in rows],
                color=["tab:green" if r.get("met") else "tab:red" if r.get("met") is False
                       else "tab:blue" for r in rows])  # fmt: skip
        for i, r in enumerate(rows):
            if r["target"] is not None:
                ax.plot([r["target"], r["target"]], [i - 0.4, i + 0.4], color="black")
        ax.axvline(1.0, color="grey", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel(f"{title}; black tick: target; green met, red not met, blue no target",
                      fontsize=8)
        ax.tick_params(axis="y", labelsize=7)
        ax.invert_yaxis()
    fig.suptitle(f"CPU benchmarks, {data['when']}, load average {data['load_average_start'][0]} "
                 f"at the start, {data['load_average_end'][0]} at the end", fontsize=9)
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)


def shown(row: dict[str, Any]) -> str:
    """A row's figure as the page and the printout show it."""
    if row["value"] is None:
        return "n/a"
    v = row["value"]
    if "floor_ms" in row:
        return f"{v:.2f}x the floor ({row['kernel_ms']:.2f} / {row['floor_ms']:.2f} ms)"
    if "rule_bytes" in row:
        return f"{v:.2f}x the bytes"
    if "peer_ms" in row:
        return f"{v:.2f}x the peer ({row['specreg_ms']:.2f} / {row['peer_ms']:.2f} ms)"
    if "%" in row["label"]:
        return f"{v:.0f} %"
    return f"{v:.2f}x"


def target_text(row: dict[str, Any]) -> str:
    if row["target"] is None:
        return "-"
    sign = "<=" if row["better"] == "lower" else ">="
    return f"{sign} {row['target']:g}" + (" %" if "%" in row["label"] else "x")


def met_text(row: dict[str, Any]) -> str:
    return {True: "met", False: "not met", None: "-"}[row.get("met")]


def markdown(data: dict[str, Any]) -> str:
    """One table per job: every figure of the run with its target, met or not, and (for a peer)
    what bounds it or why the peer is absent."""
    start, end = data["load_average_start"], data["load_average_end"]
    out = [RESULTS_BEGIN, "",
           f"One run of `python benchmarks/run_cpu.py`, {data['when']}, on {data['machine']} "
           f"({data['cpus']} CPUs); load average (1, 5, 15 min) {start[0]}, {start[1]}, "
           f"{start[2]} at the start and {end[0]}, {end[1]}, {end[2]} at the end. Raw output: "
           "`benchmarks/results/cpu-latest.txt`; every figure: `cpu-latest.json`.", ""]
    for job in JOBS:
        rows = [r for r in data["ratios"] if r.get("job") == job]
        if not rows:
            continue
        out += [f"### {job[0].upper()}{job[1:]}", "",
                "| figure | this run | target | met | bounded by, or why absent |",
                "| --- | --- | --- | --- | --- |"]
        for r in rows:
            note = r.get("absent") or r.get("bound") or ""
            out.append(f"| {r['label']} | {shown(r)} | {target_text(r)} | {met_text(r)} | "
                       f"{note.replace('|', '/')} |")
        out.append("")
    out.append(RESULTS_END)
    return "\n".join(out)


def write_page(data: dict[str, Any]) -> bool:
    """Replace the results block of docs/benchmarks.md (between the markers); False when the page
    has no markers."""
    text = PAGE.read_text(encoding="utf-8")
    if RESULTS_BEGIN not in text or RESULTS_END not in text:
        return False
    head, rest = text.split(RESULTS_BEGIN, 1)
    tail = rest.split(RESULTS_END, 1)[1]
    PAGE.write_text(head + markdown(data) + tail, encoding="utf-8")
    return True


def printout(data: dict[str, Any]) -> str:
    """Every figure with its kind, target and met / not met, job by job, and the load average."""
    start, end = data["load_average_start"], data["load_average_end"]
    out = [f"load average (1, 5, 15 min): {start} at the start, {end} at the end "
           f"({data['cpus']} CPUs)"]
    for job in JOBS:
        out.append(f"\n{job}")
        for r in (r for r in data["ratios"] if r.get("job") == job):
            out.append(f"  {r['label']:<78} {shown(r):<40} {r['kind']:<15} "
                       f"target {target_text(r):<8} {met_text(r)}")
            if r.get("absent") or r.get("bound"):
                out.append(f"      {'absent: ' + r['absent'] if r.get('absent') else 'bounded by: ' + r['bound']}")
    counts = [r.get("met") for r in data["ratios"]]
    out.append(f"\n{counts.count(True)} met, {counts.count(False)} not met, "
               f"{counts.count(None)} without a target or a value")
    return "\n".join(out)


def main() -> None:
    data = run_all()
    text = printout(data)
    print(text)
    with (RESULTS / "cpu-latest.txt").open("a", encoding="utf-8") as raw:
        raw.write("\n" + text + "\n")
    plot(data)
    page = "and the results tables of " + str(PAGE) if write_page(data) else \
        f"(no results markers in {PAGE})"
    print(f"\nwrote {RESULTS / 'cpu-latest.txt'}, {RESULTS / 'cpu-latest.json'}, {FIGURE} {page}")


if __name__ == "__main__":
    main()
