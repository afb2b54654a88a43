"""Every GPU benchmark in one short, prepared run (for a lent GPU machine with a time budget).

    python benchmarks/gpu/run_all.py [--out DIR] [--budget-s 420]

Runs the four GPU scripts at the issues' sizes, each under its own share of the time budget,
keeps going when one fails, and writes each script's output to DIR (default: $OUT, else
benchmarks/results/gpu). Every script first checks its Triton results against the torch path,
then times both and reports achieved GB/s against the device's bandwidth.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[1]

# script, arguments, share of the budget
RUNS: list[tuple[str, list[str], float]] = [
    ("bench_chain_verify_gpu.py", ["--b", "64", "128", "256", "--v", "131072"], 0.2),
    ("bench_eagle_gpu.py", ["--batches", "64", "128", "256", "--vocab", "128256"], 0.3),
    ("bench_dspark_gpu.py", ["--vocab", "131072", "--batch", "1", "8", "64"], 0.2),
    ("bench_hisparse_gpu.py", ["--bs", "16", "--steps", "4", "--top-k", "2048"], 0.3),
]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", default=os.environ.get("OUT") or str(ROOT / "benchmarks/results/gpu"))
    parser.add_argument("--budget-s", type=float, default=420.0)
    args = parser.parse_args()
    out = Path(args.out)
    out.mkdir(parents=True, exist_ok=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    failed = []
    for script, script_args, share in RUNS:
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
        seconds = time.perf_counter() - started
        print(f"{script:<28} exit {code:>3} in {seconds:6.1f} s -> {log}")
        print("\n".join("    " + line for line in text.strip().splitlines()[-12:]))
        if code != 0:
            failed.append(script)
    print(f"\n{len(RUNS) - len(failed)}/{len(RUNS)} GPU benchmarks completed")
    return 1 if failed else 0


if __name__ == "__main__":
    raise SystemExit(main())
