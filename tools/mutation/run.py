"""Run single-point mutants of the kernel families' torch implementations against their tests.

Usage (from the repository root, by hand; never part of `.ci/run`):

    python tools/mutation/run.py [--module NAME ...] [--baseline-tests] [--only KEYS_FILE]
                                 [--timeout-factor 4] [--out tools/mutation/results.jsonl]

Each mutant (`mutants.py`) runs in a child forked from a parent that has already imported
torch, numpy, triton (interpreter), hypothesis and pytest, so a mutant costs one pytest
collection of its module's test files, not an interpreter start. The child serves the mutated
source from memory (nothing on disk changes) and runs `pytest -x --assert=plain` over the
module's test files (plain asserts: pytest's rewriting hook would otherwise import every module
of the specreg distribution, which provides a pytest plugin, from disk, unmutated)
(`COVERAGE` below): exit 0 = survived, anything else (a failing test, a collection error, a
timeout) = killed. Mutants listed in `equivalent.txt` (one key per line, `#` then the reason)
count as equivalent. The score is killed / (all - equivalent).
"""

from __future__ import annotations

import argparse
import importlib.abc
import importlib.util
import json
import os
import random
import signal
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT / "tools" / "mutation"))
sys.path.insert(0, str(ROOT))

from mutants import Mutant, mutants  # noqa: E402

#: Module -> (source file, test files run against its mutants, fastest killers first).
#: `NEW_TESTS` are the boundary and production-shape tests of issue 24: `--baseline-tests`
#: leaves them out (the score of the suite before them).
COVERAGE: dict[str, tuple[str, list[str]]] = {
    "specreg.kernels.filtering.torch_impl": (
        "specreg/kernels/filtering/torch_impl.py",
        ["tests/kernels/test_boundaries_filtering.py", "tests/kernels/test_sampling_params.py",
         "tests/kernels/test_kernel_references.py"],
    ),
    "specreg.kernels.chain.torch_impl": (
        "specreg/kernels/chain/torch_impl.py",
        ["tests/kernels/test_boundaries_chain.py", "tests/kernels/test_chain_greedy.py",
         "tests/kernels/test_chain_sampling.py", "tests/kernels/test_chain_errors.py",
         "tests/kernels/test_chain_fuzz.py", "tests/kernels/test_kernel_references.py"],
    ),
    "specreg.kernels.chain_params.torch_impl": (
        "specreg/kernels/chain_params/torch_impl.py",
        ["tests/kernels/test_boundaries_chain.py", "tests/kernels/test_sampling_params.py",
         "tests/kernels/test_kernel_references.py"],
    ),
    "specreg_eagle.kernels.verify_greedy.torch_impl": (
        "plugins/specreg_eagle/kernels/verify_greedy/torch_impl.py",
        ["tests/eagle/test_boundaries_eagle.py", "tests/eagle/test_eagle_verify.py",
         "tests/eagle/test_eagle_reference.py", "tests/eagle/test_eagle_fuzz_kernels.py"],
    ),
    "specreg_eagle.kernels.verify_sampling.torch_impl": (
        "plugins/specreg_eagle/kernels/verify_sampling/torch_impl.py",
        ["tests/eagle/test_boundaries_eagle.py", "tests/eagle/test_eagle_verify.py",
         "tests/eagle/test_eagle_reference.py", "tests/eagle/test_eagle_params.py",
         "tests/eagle/test_eagle_fuzz_kernels.py", "tests/eagle/test_eagle_lossless.py"],
    ),
    "specreg_hisparse.kernels.swap.torch_impl": (
        "plugins/specreg_hisparse/kernels/swap/torch_impl.py",
        ["tests/hisparse/test_boundaries_hisparse.py", "tests/hisparse/test_reference.py",
         "tests/hisparse/test_swap_rules.py", "tests/hisparse/test_numpy_fallback.py",
         "tests/hisparse/test_property.py"],
    ),
    "specreg_dspark.kernels.markov_head.torch_impl": (
        "plugins/specreg_dspark/kernels/markov_head/torch_impl.py",
        ["tests/dspark/test_boundaries_dspark.py", "tests/dspark/test_dspark_markov.py",
         "tests/dspark/test_dspark_reference.py", "tests/dspark/test_dspark_kernels.py"],
    ),
}
NEW_TESTS = {
    "tests/kernels/test_boundaries_filtering.py", "tests/kernels/test_boundaries_chain.py",
    "tests/eagle/test_boundaries_eagle.py", "tests/hisparse/test_boundaries_hisparse.py",
    "tests/dspark/test_boundaries_dspark.py", "tests/kernels/test_production_shapes.py",
}
#: Only the torch path is mutated: Triton-only tests would run the interpreter for nothing.
DESELECT = "not triton and not compile"
EQUIVALENT = Path(__file__).with_name("equivalent.txt")


class _MutatedSource(importlib.abc.MetaPathFinder, importlib.abc.Loader):
    """Serves one module from a source string (its file on disk stays untouched)."""

    def __init__(self, name: str, path: str, source: str) -> None:
        self.name, self.path, self.source = name, path, source

    def find_spec(self, fullname, path, target=None):
        if fullname != self.name:
            return None
        return importlib.util.spec_from_loader(fullname, self, origin=self.path)

    def create_module(self, spec):
        return None

    def exec_module(self, module) -> None:
        module.__file__ = self.path
        exec(compile(self.source, self.path, "exec"), module.__dict__)


def _preload() -> None:
    """Import the heavy third-party packages once, in the parent (the children inherit them)."""
    os.environ.setdefault("TRITON_INTERPRET", "1")
    os.environ.setdefault("OMP_NUM_THREADS", "1")
    import hypothesis  # noqa: F401
    import numpy  # noqa: F401
    import pytest  # noqa: F401
    import torch

    torch.set_num_threads(1)
    try:
        import scipy.stats  # noqa: F401
        import triton  # noqa: F401
    except ImportError:
        pass


def _run_child(module: str, path: str, source: str | None, tests: list[str], log: Path) -> int:
    pid = os.fork()
    if pid:
        return pid
    try:
        fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_TRUNC)
        os.dup2(fd, 1)
        os.dup2(fd, 2)
        if source is not None:
            sys.meta_path.insert(0, _MutatedSource(module, str(ROOT / path), source))
        import pytest

        os.chdir(ROOT)
        code = pytest.main(
            ["-x", "-q", "-p", "no:cacheprovider", "-k", DESELECT, "-W", "ignore",
             "--assert=plain", *tests]
        )
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))
    except BaseException:  # noqa: BLE001 - a child must never return into the parent's loop
        os._exit(70)


def _wait(pid: int, timeout: float) -> tuple[int | None, float]:
    """(exit code or None on timeout, seconds); the child dies with the parent."""
    start = time.monotonic()

    def _stop(signum, frame):
        os.kill(pid, signal.SIGKILL)
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, _stop)
    while True:
        done, status = os.waitpid(pid, os.WNOHANG)
        if done:
            return os.waitstatus_to_exitcode(status), time.monotonic() - start
        if time.monotonic() - start > timeout:
            os.kill(pid, signal.SIGKILL)
            os.waitpid(pid, 0)
            return None, time.monotonic() - start
        time.sleep(0.05)


def _equivalents() -> dict[str, str]:
    out = {}
    if EQUIVALENT.exists():
        for line in EQUIVALENT.read_text().splitlines():
            key, _, reason = line.partition("#")
            if key.strip():
                out[key.strip()] = reason.strip()
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--module", action="append", help="module(s) to mutate (default: all)")
    parser.add_argument("--baseline-tests", action="store_true",
                        help="leave out the tests of issue 24 (the score before them)")
    parser.add_argument("--only", type=Path, help="run only the keys listed in this file")
    parser.add_argument("--sample", type=int, default=0,
                        help="per module, run a seeded sample of this many mutants (0: all)")
    parser.add_argument("--seed", type=int, default=24)
    parser.add_argument("--timeout-factor", type=float, default=4.0)
    parser.add_argument("--out", type=Path, default=ROOT / "tools/mutation/results.jsonl")
    args = parser.parse_args(argv)
    _preload()
    only = None
    if args.only:
        only = {line.split()[0] for line in args.only.read_text().splitlines() if line.strip()}
    equivalent = _equivalents()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"mutation-{os.getpid()}.log"
    started = time.monotonic()
    totals = {"killed": 0, "survived": 0, "equivalent": 0}
    with args.out.open("w") as out:
        for module, (path, tests) in COVERAGE.items():
            if args.module and module not in args.module:
                continue
            tests = [t for t in tests if (ROOT / t).exists()]
            if args.baseline_tests:
                tests = [t for t in tests if t not in NEW_TESTS]
            todo = [m for m in mutants(module, (ROOT / path).read_text())
                    if only is None or m.key in only]  # fmt: skip
            if args.sample and len(todo) > args.sample:
                picked = set(random.Random(f"{args.seed}:{module}").sample(range(len(todo)),
                                                                            args.sample))
                todo = [m for i, m in enumerate(todo) if i in picked]
            if not todo:
                continue
            code, base = _wait(_run_child(module, path, None, tests, log), 3600)
            if code != 0:
                print(f"{module}: the unmutated tests fail (exit {code}); see {log}")
                return 2
            timeout = max(args.timeout_factor * base, base + 30)
            print(f"{module}: {len(todo)} mutants, tests {base:.1f} s", flush=True)
            for mutant in todo:
                status = _one(module, path, mutant, tests, log, timeout, equivalent)
                totals[status[0]] += 1
                out.write(json.dumps({"key": mutant.key, "line": mutant.line,
                                      "change": mutant.description, "status": status[0],
                                      "seconds": round(status[1], 1)}) + "\n")  # fmt: skip
                out.flush()
                if status[0] != "killed":
                    print(f"  {status[0]}: {mutant.key} ({mutant.description})", flush=True)
    counted = totals["killed"] + totals["survived"]
    score = 100.0 * totals["killed"] / counted if counted else 100.0
    print(f"killed {totals['killed']}, survived {totals['survived']}, equivalent "
          f"{totals['equivalent']}: score {score:.1f} % in {time.monotonic() - started:.0f} s")
    return 0


def _one(module, path, mutant: Mutant, tests, log, timeout, equivalent) -> tuple[str, float]:
    code, seconds = _wait(_run_child(module, path, mutant.source, tests, log), timeout)
    if code == 0:
        return ("equivalent" if mutant.key in equivalent else "survived"), seconds
    return "killed", seconds


if __name__ == "__main__":
    sys.exit(main())
