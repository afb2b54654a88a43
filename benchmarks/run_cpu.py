"""Run every CPU benchmark at the issues' sizes, keep the raw output, and plot the ratios.

    python benchmarks/run_cpu.py            # writes benchmarks/results/cpu-latest.{txt,json}
                                            # and docs/img/benchmarks.png

Each ratio compares two paths measured in the same run of the same script on this machine, so
ratios from different scripts or runs are not comparable in absolute time. Run on a quiet machine.

Besides the ratios against a naive loop or a baseline, every `FLOOR` line a script prints (see
benchmarks/floors.py) becomes a row: the kernel's time as a multiple of the floor of the same
work (one read of the bytes it must read, or one index_copy_ of the rows it must copy).
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
sys.path.insert(0, str(ROOT / "benchmarks"))
from floors import FLOOR_LINE, TRAFFIC_LINE  # noqa: E402

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
        ["benchmarks/bench_chain_verify.py", "--threads", "1", "--profile"],
        [
            ("chain greedy verify vs naive loop", r"greedy .*speed-up x([\d.]+)", "higher", None),
            ("chain sampling verify vs naive loop", r"sampling .*speed-up x([\d.]+)", "higher", None),
        ],
    ),
    (
        "eagle",
        ["benchmarks/bench_eagle_cpu.py", "--issue-sizes", "--threads", "1", "--profile"],
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
    (
        "real-text",
        ["benchmarks/bench_real_text.py", "--files", "24", "--ks", "2,4,8,16"],
        [
            ("suffix chain accepted length, specreg / arctic-inference (k=16)",
             r"^suffix chain: specreg/arctic accepted length .*k=16: ([\d.]+);", "higher", 1.0),
            ("suffix chain proposal time, arctic-inference / specreg (k=16)",
             r"^suffix chain: .*proposal time .*k=16: ([\d.]+)$", "higher", 1.0),
        ],
    ),
]


# issue #22: the multiples of the floor to reach on CPU (one thread, the issues' sizes)
FLOOR_TARGETS = {
    "chain greedy verify": 1.5,
    "chain greedy verify, whole logits": 1.3,
    "chain sampling verify": 2.0,
    "EAGLE tree greedy verify": 1.5,
    "EAGLE tree greedy verify, whole logits": 1.5,
    "EAGLE tree sampling verify": 3.0,
    "EAGLE tree sampling verify with q": 3.0,
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


#: issue #22: a verify kernel loads at most this multiple of the bytes its rule must read.
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


def run_all() -> dict[str, Any]:
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
        ratios.extend(floor_rows(name, output))
        ratios.extend(traffic_rows(name, output))
    data = {
        "when": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "machine": f"{platform.machine()}, {platform.processor() or 'cpu'}, python {platform.python_version()}",
        "ratios": ratios,
    }
    (RESULTS / "cpu-latest.txt").write_text("\n\n".join(raw) + "\n", encoding="utf-8")
    (RESULTS / "cpu-latest.json").write_text(json.dumps(data, indent=2) + "\n", encoding="utf-8")
    return data


def chart_rows(data: dict[str, Any]) -> list[dict[str, Any]]:
    """The speed ratios (against a naive loop or a baseline), for the chart's first panel; a
    percentage (the planned copy's share of index_copy_ bandwidth) is drawn as the ratio it is
    (50% -> 0.5), with its target. Multiples of a floor go to the second panel."""
    rows = []
    for r in data["ratios"]:
        if r["value"] is None or "floor_ms" in r or "rule_bytes" in r:
            continue
        if "%" in r["label"]:
            target = None if r["target"] is None else r["target"] / 100
            r = {**r, "label": r["label"].replace(" (%)", " (ratio)"), "value": r["value"] / 100,
                 "target": target}
        rows.append(r)
    return rows


def plot(data: dict[str, Any]) -> None:
    """Two panels: ratios against a naive loop or baseline (higher is better; the planned copy's
    bandwidth as a fraction of index_copy_'s), and multiples of the floor (lower is better)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    speed = chart_rows(data)
    floors = [r for r in data["ratios"]
              if r["value"] is not None and ("floor_ms" in r or "rule_bytes" in r)]
    panels = [(speed, "ratio vs naive loop / baseline (higher is better)"),
              (floors, "time (or interpreter bytes) as a multiple of the floor (lower is better)")]  # fmt: skip
    height = 0.42 * (len(speed) + len(floors)) + 2
    fig, axes = plt.subplots(2, 1, figsize=(9, height),
                             gridspec_kw={"height_ratios": [max(len(speed), 1), max(len(floors), 1)]})  # fmt: skip
    for ax, (rows, title) in zip(axes, panels, strict=True):
        ax.barh([r["label"] for r in rows], [r["value"] for r in rows],
                color=["tab:blue" if r["better"] == "higher" else "tab:orange" for r in rows])  # fmt: skip
        for i, r in enumerate(rows):
            if r["target"] is not None:
                ax.plot([r["target"], r["target"]], [i - 0.4, i + 0.4], color="tab:red")
        ax.axvline(1.0, color="grey", linewidth=0.8)
        ax.set_xscale("log")
        ax.set_xlabel(f"{title}; red: target")
        ax.invert_yaxis()
    fig.tight_layout()
    FIGURE.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(FIGURE, dpi=110)


def main() -> None:
    data = run_all()
    for r in data["ratios"]:
        value = "n/a" if r["value"] is None else f"{r['value']:.2f}"
        target = "" if r["target"] is None else f"  (target {r['target']:g})"
        print(f"{r['label']:<60} {value}{target}")
    plot(data)
    print(f"\nwrote {RESULTS / 'cpu-latest.txt'}, {RESULTS / 'cpu-latest.json'} and {FIGURE}")


if __name__ == "__main__":
    main()
