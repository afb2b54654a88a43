"""Run every CPU benchmark at the issues' sizes, keep the raw output, and plot the ratios.

    python benchmarks/run_cpu.py            # writes benchmarks/results/cpu-latest.{txt,json}
                                            # and docs/img/benchmarks.png

Each ratio compares two paths measured in the same run of the same script on this machine, so
ratios from different scripts or runs are not comparable in absolute time. Run on a quiet machine.
"""

from __future__ import annotations

import json
import platform
import re
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
RESULTS = ROOT / "benchmarks" / "results"
FIGURE = ROOT / "docs" / "img" / "benchmarks.png"

# (label, command, regex whose first group is the ratio, "higher"/"lower" is better, target)
RUNS: list[tuple[str, list[str], list[tuple[str, str, str, float | None]]]] = [
    (
        "plan",
        ["benchmarks/bench_plan.py", "--repeat", "7", "--number", "200000"],
        [("plan.num_tokens_per_req / direct call", r"plan / direct = ([\d.]+)x", "lower", 1.5)],
    ),
    (
        "chain",
        ["benchmarks/bench_chain_verify.py", "--threads", "1"],
        [
            ("chain greedy verify vs naive loop", r"greedy .*speed-up x([\d.]+)", "higher", None),
            ("chain sampling verify vs naive loop", r"sampling .*speed-up x([\d.]+)", "higher", None),
        ],
    ),
    (
        "eagle",
        ["benchmarks/bench_eagle_cpu.py", "--issue-sizes", "--threads", "1"],
        [
            ("EAGLE build_tree vs naive loop", r"build_tree .*ratio\s+([\d.]+)x", "higher", 20.0),
            ("EAGLE tree greedy verify vs naive loop", r"greedy verify .*ratio\s+([\d.]+)x", "higher", 20.0),
            ("EAGLE tree sampling verify vs naive loop", r"sampling verify torch.*ratio\s+([\d.]+)x", "higher", 20.0),
        ],
    ),
    (
        "dspark",
        ["benchmarks/bench_dspark_markov.py", "--vocab", "131072", "--batch", "1", "16", "64"],
        [("DSpark fused Markov step (torch) vs two-step, b=64", r"^\s+64\s+[\d.]+\s+[\d.]+\s+([\d.]+)", "higher", None)],
    ),
    (
        "hisparse",
        ["benchmarks/bench_hisparse.py", "--full"],
        [
            ("HiSparse swap (torch) vs naive reference", r"-> ([\d.]+)x \(target >= 30x\)", "higher", 30.0),
            ("HiSparse planned copy / index_copy_ bandwidth (%)", r"-> (\d+)% \(target >= 50%\)", "higher", 50.0),
            ("HiSparse 4 steps in one call vs 4 calls (time)", r"\(([\d.]+)x\); resolving", "higher", None),
        ],
    ),
]


def run_all() -> dict[str, object]:
    RESULTS.mkdir(parents=True, exist_ok=True)
    raw: list[str] = []
    ratios: list[dict[str, object]] = []
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
        for label, pattern, better, target in patterns:
            match = re.search(pattern, output, flags=re.MULTILINE)
            value = float(match.group(1)) if match else None
            ratios.append(
                {"benchmark": name, "label": label, "value": value, "better": better, "target": target}
            )
    data = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}",
        "ratios": ratios,
    }
    (RESULTS / "cpu-latest.txt").write_text("\n\n".join(raw) + "\n", encoding="utf-8")
    (RESULTS / "cpu-latest.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data


def chart_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """Every measured ratio, for the chart; a percentage (the planned copy's share of
    index_copy_ bandwidth) is drawn as the ratio it is (50% -> 0.5), with its target."""
    rows = []
    for r in data["ratios"]:
        if r["value"] is None:
            continue
        if "%" in r["label"]:
            target = None if r["target"] is None else r["target"] / 100
            r = {**r, "label": r["label"].replace(" (%)", " (ratio)"), "value": r["value"] / 100,
                 "target": target}
        rows.append(r)
    return rows


def plot(data: dict[str, object]) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    rows = chart_rows(data)
    fig, ax = plt.subplots(figsize=(8, 0.45 * len(rows) + 1))
    labels = [r["label"] for r in rows]
    values = [r["value"] for r in rows]
    ax.barh(labels, values, color=["tab:blue" if r["better"] == "higher" else "tab:green" for r in rows])
    for i, r in enumerate(rows):
        if r["target"] is not None:
            ax.plot([r["target"], r["target"]], [i - 0.4, i + 0.4], color="tab:red")
    ax.axvline(1.0, color="grey", linewidth=0.8)
    ax.set_xscale("log")
    ax.set_xlabel("ratio measured in one run (red: target)")
    ax.invert_yaxis()
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)


def main() -> None:
    data = run_all()
    for r in data["ratios"]:  # type: ignore[union-attr]
        value = "n/a" if r["value"] is None else f"{r['value']:.2f}"
        target = "" if r["target"] is None else f"  (target {r['target']:g})"
        print(f"{r['label']:<55} {value}{target}")
    plot(data)
    print(f"\nwrote {RESULTS / 'cpu-latest.txt'}, {RESULTS / 'cpu-latest.json'} and {FIGURE}")


if __name__ == "__main__":
    main()
