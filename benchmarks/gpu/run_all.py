"""Every GPU benchmark in one short, prepared run (for a lent GPU machine with a time budget).

    python benchmarks/gpu/run_all.py [--out DIR] [--budget-s 420] [--peak-gbs 4800]
    python benchmarks/gpu/run_all.py --dry-run     # no GPU: every kernel entry, interpreted

Runs the GPU scripts at the target sizes, each under its own share of the time budget, keeps
going when one fails, and writes each script's output to DIR (default: $OUT, else
benchmarks/results/gpu). `bench_kernels_gpu.py` covers every Triton kernel of the repository,
one entry per kernel family (`ENTRIES`; tests/kernels/test_gpu_coverage.py fails when a
kernel has none), and reports the memory-bound ones as a share of the HBM peak (`--peak-gbs`,
H200: about 4800 GB/s): the bytes the family's rule must read and write / the kernel's time /
the peak. The other scripts are the families' deeper studies (tile sweeps, memory peaks, the
pinned-copy peak of the HiSparse copy). Every script first checks its Triton results against the
torch path. At the end it lists every FLOOR line the scripts printed (kernel time against moving
its bytes at the HBM peak, or at the pinned-copy peak for the HiSparse copies) with issue #15's
GPU targets, and writes them to DIR/floors.json.

`--dry-run` runs only `bench_kernels_gpu.py --dry-run`: on the CPU, under Triton's interpreter,
at tiny sizes, every entry once, checked against torch, with the kernels each launched. It times
nothing; it proves the script is ready for a lent GPU.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]
sys.path.insert(0, str(HERE.parent))
from floors import FLOOR_LINE  # noqa: E402

#: The coverage script: every Triton kernel, one entry per family (takes --peak-gbs, --dry-run).
KERNELS_SCRIPT = "bench_kernels_gpu.py"

# script, arguments, share of the budget, whether it takes --peak-gbs
RUNS: list[tuple[str, list[str], float, bool]] = [
    (KERNELS_SCRIPT, [], 0.4, True),  # compiles all 16 kernels on its first launches
    ("bench_chain_verify_gpu.py", ["--b", "64", "128", "256", "--v", "131072"], 0.12, True),
    ("bench_eagle_gpu.py", ["--batches", "64", "128", "256", "--vocab", "128256"], 0.14, True),
    ("bench_dspark_gpu.py", ["--vocab", "131072", "--batch", "1", "8", "64"], 0.12, False),
    ("bench_hisparse_gpu.py", ["--bs", "16", "--steps", "4", "--top-k", "2048"], 0.14, False),
    ("bench_sampling_params_gpu.py", ["--b", "64", "--v", "131072"], 0.08, False),
]


def gpu_target(name: str) -> float | None:
    """Issue #15: verify kernels >= 70 % of HBM bandwidth at b >= 64 (multiple <= 1 / 0.7),
    the HiSparse copy >= 60 % of the pinned-copy peak (multiple <= 1 / 0.6)."""
    if name.startswith("HiSparse"):
        return round(1 / 0.6, 2)
    batch = re.search(r"b=(\d+)", name)
    if "verify" in name and batch and int(batch.group(1)) >= 64:
        return round(1 / 0.7, 2)
    return None


def summarise_floors(logs: list[str], out: Path) -> None:
    rows = [
        {"name": m["name"], "multiple": float(m["multiple"]), "kernel_ms": float(m["kernel"]),
         "floor_ms": float(m["floor"]), "floor": m["what"], "target": gpu_target(m["name"])}
        for text in logs
        for m in FLOOR_LINE.finditer(text)
    ]  # fmt: skip
    print("\nmultiples of the floor (target: issue #15)")
    for row in rows:
        target = "" if row["target"] is None else f"  (target <= {row['target']:g}x)"
        print(f"  {row['name']:<60} {row['multiple']:6.2f}x  {row['floor']}{target}")
    (out / "floors.json").write_text(json.dumps(rows, indent=2) + "\n", encoding="utf-8")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks/results/gpu"))
    parser.add_argument("--budget-s", type=float, default=420.0)
    parser.add_argument("--peak-gbs", type=float, default=4800.0,
                        help="HBM peak in GB/s (H200 HBM3e: about 4800)")
    parser.add_argument("--dry-run", action="store_true",
                        help="no GPU: every kernel entry once under the interpreter, tiny sizes")
    args = parser.parse_args()
    runs = ([(KERNELS_SCRIPT, ["--dry-run"], 1.0, False)] if args.dry_run else
            [(script, [*script_args, *(["--peak-gbs", str(args.peak_gbs)] if peak else [])],
              share, peak) for script, script_args, share, peak in RUNS])
    out = Path(args.out) / ("dry-run" if args.dry_run else "")
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    failed, logs = [], []
    for script, script_args, share, _ in runs:
        started = time.perf_counter()
        log = out / (Path(script).stem + ".txt")
        try:
            proc = subprocess.run(
                [sys.executable, str(HERE / script), *script_args],
                cwd=ROOT, env=env, capture_output=True, text=True, timeout=args.budget_s * share,
            )
            text, code = proc.stdout + proc.stderr, proc.returncode
        except subprocess.TimeoutExpired as exc:
            partial = exc.stdout or b""
            text = (partial.decode() if isinstance(partial, bytes) else partial) + "\n[timed out]"
            code = 124
        log.write_text(text, encoding="utf-8")
        logs.append(text)
        seconds = time.perf_counter() - started
        print(f"{script:<28} exit {code:>3} in {seconds:6.1f} s -> {log}")
        print("\n".join("    " + line for line in text.strip().splitlines()[-12:]))
        if code != 0:
            failed.append(script)
    summarise_floors(logs, out)
    print(f"\n{len(runs) - len(failed)}/{len(runs)} GPU benchmarks completed"
          + (" (dry run: nothing timed)" if args.dry_run else ""))
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
