"""Run single-point mutants of the kernel families' torch implementations against their tests.

Usage (from the repository root, by hand; never part of `.ci/run`):

    nice -n 15 python tools/mutation/run.py [--module NAME ...] [--baseline-tests]
        [--only KEYS_FILE] [--sample N --seed S] [--confirm] [--out tools/mutation/results.jsonl]

Per module (`COVERAGE` below: the test files that exercise it) a module parent imports torch,
numpy, triton (interpreter), hypothesis, pytest and the module's test files once, then runs the
tests once with a probe before each statement of the module (`selection.LineMap`): which tests
execute which statements of the module, and how long each takes. Each mutant (`mutants.py`) then runs in a child forked from that
parent: the mutated code is swapped into the imported functions (`selection.swap_code`; nothing
on disk changes) and `pytest -x --assert=plain` runs only the tests that execute the mutated
statement, fastest first, under a timeout of `--timeout-factor` times their mapped time plus
`--timeout-slack` seconds. A mutant of a module-level statement (a constant, a class body) is
served as source from memory to a fresh import instead, against every test of the module.
(Plain asserts: pytest's rewriting hook would otherwise import every module of the specreg
distribution, which provides a pytest plugin, from disk, unmutated.)
Exit 0 = survived, anything else (a failing test, a collection error, a timeout) = killed;
`--confirm` runs each survivor again the slow way (fresh import, every test file of its module)
to make sure the selection did not hide a killing test. Mutants listed in `equivalent.txt` (one
key per line, `#` then the reason) count as equivalent. The score is killed / (all - equivalent).
"""

from __future__ import annotations

import argparse
import gc
import importlib
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

import selection  # noqa: E402
from mutants import Mutant, mutants  # noqa: E402

#: Module -> (source file, the test files that exercise it; the line map picks from these).
#: `NEW_TESTS` are the boundary and production-shape tests of issue 24: `--baseline-tests`
#: leaves them out (the score of the suite before them).
COVERAGE: dict[str, tuple[str, list[str]]] = {
    "specreg.kernels.filtering.torch_impl": (
        "specreg/kernels/filtering/torch_impl.py",
        ["tests/kernels/test_boundaries_filtering.py", "tests/kernels/test_sampling_params.py",
         "tests/kernels/test_kernel_references.py", "tests/kernels/test_production_shapes.py"],
    ),
    "specreg.kernels.chain.torch_impl": (
        "specreg/kernels/chain/torch_impl.py",
        ["tests/kernels/test_boundaries_chain.py", "tests/kernels/test_chain_greedy.py",
         "tests/kernels/test_chain_sampling.py", "tests/kernels/test_chain_errors.py",
         "tests/kernels/test_chain_fuzz.py", "tests/kernels/test_kernel_references.py", "tests/kernels/test_production_shapes.py",
         "tests/kernels/test_chain_invariant.py", "tests/kernels/test_chain_race.py"],
    ),
    "specreg.kernels.chain_params.torch_impl": (
        "specreg/kernels/chain_params/torch_impl.py",
        ["tests/kernels/test_boundaries_chain.py", "tests/kernels/test_sampling_params.py",
         "tests/kernels/test_kernel_references.py", "tests/kernels/test_production_shapes.py"],
    ),
    "specreg.kernels.random_stream.torch_impl": (
        "specreg/kernels/random_stream/torch_impl.py",
        ["tests/kernels/test_random_stream.py", "tests/kernels/test_chain_race.py",
         "tests/kernels/test_lossless_production_shapes.py",
         "tests/kernels/test_stream_only_randomness.py"],
    ),
    "specreg.kernels.sampling.torch_impl": (
        "specreg/kernels/sampling/torch_impl.py",
        ["tests/kernels/test_sampling.py", "tests/kernels/test_chain_race.py",
         "tests/kernels/test_chain_sampling.py", "tests/kernels/test_lossless_production_shapes.py",
         "tests/kernels/test_chain_invariant.py"],
    ),
    "specreg.kernels.block_race": (
        "specreg/kernels/block_race.py",
        ["tests/kernels/test_chain_race.py", "tests/kernels/test_chain_sampling.py",
         "tests/kernels/test_lossless_production_shapes.py",
         "tests/kernels/test_chain_invariant.py"],
    ),
    "specreg.kernels.exp_log": (
        "specreg/kernels/exp_log.py",
        ["tests/kernels/test_sampling.py", "tests/kernels/test_filtering_numbers.py",
         "tests/kernels/test_sampling_params.py"],
    ),
    "specreg.kernels.pivot.torch_impl": (
        "specreg/kernels/pivot/torch_impl.py",
        ["tests/kernels/test_filtering_pivot.py", "tests/kernels/test_boundaries_filtering.py",
         "tests/kernels/test_sampling_params.py", "tests/kernels/test_filtering_numbers.py"],
    ),
    "specreg.kernels.relaxed.torch_impl": (
        "specreg/kernels/relaxed/torch_impl.py",
        ["tests/kernels/test_relaxed.py", "tests/kernels/test_relaxed_params.py"],
    ),
    "specreg.kernels.tree_verify_greedy.torch_impl": (
        "specreg/kernels/tree_verify_greedy/torch_impl.py",
        ["tests/kernels/test_boundaries_tree.py", "tests/kernels/test_tree_verify.py",
         "tests/kernels/test_tree_references.py", "tests/kernels/test_tree_fuzz.py",
         "tests/kernels/test_tree_build.py", "tests/kernels/test_production_shapes.py"],
    ),
    "specreg.kernels.tree_verify_sampling.torch_impl": (
        "specreg/kernels/tree_verify_sampling/torch_impl.py",
        ["tests/kernels/test_boundaries_tree.py", "tests/kernels/test_tree_verify.py",
         "tests/kernels/test_tree_references.py", "tests/kernels/test_tree_params.py",
         "tests/kernels/test_tree_fuzz.py", "tests/kernels/test_tree_lossless.py",
         "tests/kernels/test_tree_build.py", "tests/kernels/test_production_shapes.py"],
    ),
    "specreg_hisparse.kernels.swap.torch_impl": (
        "plugins/specreg_hisparse/kernels/swap/torch_impl.py",
        ["tests/hisparse/test_boundaries.py", "tests/hisparse/test_reference.py",
         "tests/hisparse/test_swap_rules.py", "tests/hisparse/test_numpy_fallback.py",
         "tests/hisparse/test_property.py", "tests/hisparse/test_swap_load.py",
         "tests/hisparse/test_production_shapes.py"],
    ),
    "specreg_dspark.kernels.markov_head.torch_impl": (
        "plugins/specreg_dspark/kernels/markov_head/torch_impl.py",
        ["tests/dspark/test_boundaries.py", "tests/dspark/test_markov.py",
         "tests/dspark/test_reference.py", "tests/dspark/test_kernels.py",
         "tests/dspark/test_fuzz_kernels.py", "tests/kernels/test_production_shapes.py"],
    ),
}
NEW_TESTS = {
    "tests/kernels/test_boundaries_filtering.py", "tests/kernels/test_boundaries_chain.py",
    "tests/kernels/test_boundaries_tree.py", "tests/hisparse/test_boundaries.py",
    "tests/dspark/test_boundaries.py", "tests/kernels/test_production_shapes.py",
    "tests/hisparse/test_production_shapes.py",
}
#: Only the torch path is mutated: Triton-only tests would run the interpreter for nothing.
DESELECT = "not triton and not compile"
EQUIVALENT = Path(__file__).with_name("equivalent.txt")
#: A child's exit code for "this mutant cannot be swapped in; run it as a fresh import".
DEFER = 99


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


def _pytest(args: list[str], plugins: list | None = None) -> int:
    import pytest

    os.chdir(ROOT)
    # -n 0: in this process (the project's addopts spread tests over xdist workers, which the
    # line map and the swapped code never reach)
    return int(pytest.main(["-q", "-p", "no:cacheprovider", "-p", "no:unraisableexception",
                            "-n", "0", "-W", "ignore", "--assert=plain",
                            *args], plugins=plugins or []))  # fmt: skip


def _fork(job, log: Path | None) -> int:
    """Run `job()` (returns an exit code) in a forked child, its output in `log` (if given)."""
    pid = os.fork()
    if pid:
        return pid
    try:
        if log is not None:
            _redirect(log)
        code = job()
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(int(code))
    except BaseException:  # noqa: BLE001 - a child must never return into the parent's loop
        import traceback

        traceback.print_exc()
        sys.stderr.flush()
        os._exit(70)


def _redirect(log: Path) -> tuple[int, int]:
    """Point stdout and stderr at `log` (appending); returns the old descriptors."""
    sys.stdout.flush()
    sys.stderr.flush()
    saved = os.dup(1), os.dup(2)
    fd = os.open(log, os.O_WRONLY | os.O_CREAT | os.O_APPEND)
    os.dup2(fd, 1)
    os.dup2(fd, 2)
    os.close(fd)
    return saved


def _restore(saved: tuple[int, int]) -> None:
    sys.stdout.flush()
    sys.stderr.flush()
    os.dup2(saved[0], 1)
    os.dup2(saved[1], 2)


#: Top-level packages whose modules a fresh import drops first (the core, the built-in plugins,
#: the tests).
_PROJECT_PACKAGES = frozenset({"specreg", "tests", "specreg_eagle", "specreg_dspark",
                               "specreg_hisparse", "specreg_lookup", "specreg_medusa",
                               "specreg_draft_model"})


def _fresh_import(module: str, path: str, source: str | None, tests: list[str]):
    """A job: the module served from `source` to a fresh import, `pytest -x` over `tests`."""

    def job() -> int:
        if source is not None:
            # A module already imported here (by the runner, or by a module it imported) would
            # be served from sys.modules and the mutant never seen: drop the project's modules
            # and the tests that hold their names, so the run imports them afresh.
            for name in [n for n in sys.modules if n.split(".")[0] in _PROJECT_PACKAGES]:
                del sys.modules[name]
            sys.meta_path.insert(0, _MutatedSource(module, str(ROOT / path), source))
        return _pytest(["-x", *tests])

    return job


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
        time.sleep(0.02)


def _equivalents() -> dict[str, str]:
    out = {}
    if EQUIVALENT.exists():
        for line in EQUIVALENT.read_text().splitlines():
            key, _, reason = line.partition("#")
            if key.strip():
                out[key.strip()] = reason.strip()
    return out


def _select(todo: list[Mutant], args) -> list[Mutant]:
    if args.sample and len(todo) > args.sample:
        module = todo[0].key.rsplit(":", 3)[0]
        picked = set(random.Random(f"{args.seed}:{module}").sample(range(len(todo)), args.sample))
        todo = [m for i, m in enumerate(todo) if i in picked]
    return todo


class _Module:
    """One module's run: its line map, then its mutants, from a parent with its tests imported."""

    def __init__(self, module: str, path: str, tests: list[str], args, log: Path) -> None:
        self.module, self.path, self.tests, self.args, self.log = module, path, tests, args, log
        text = (ROOT / path).read_text()
        self.in_function = selection.function_lines(text)
        self.spans = selection.statement_lines(text)
        self.lines: dict[str, set[int]] = {}
        self.seconds: dict[str, float] = {}

    def map_tests(self) -> float:
        """Run every test once with the probes in (in a child); returns the wall time."""
        out = Path(f"{self.log}.map.json")
        module = sys.modules[self.module]
        line_map = selection.LineMap(module)

        def job() -> int:
            selection.swap_code(module, selection.probed((ROOT / self.path).read_text()))
            setattr(module, selection.HITS, set())
            code = _pytest(["-k", DESELECT, *self.tests], plugins=[line_map])
            self.lines, self.seconds = line_map.lines, line_map.seconds
            self.save(out)
            return code

        code, seconds = _wait(_fork(job, self.log), 7200)
        if code != 0:
            raise SystemExit(f"{self.module}: the unmutated tests fail (exit {code}); see {self.log}")
        self.load(out)
        return seconds

    def tests_for(self, mutant: Mutant) -> list[str]:
        """The tests that execute the mutant's statement, fastest first (module-level: all)."""
        if mutant.line not in self.in_function:
            chosen = list(self.lines)
        else:
            first = self.spans.get(mutant.line, mutant.line)
            chosen = [nodeid for nodeid, hit in self.lines.items() if first in hit]
            # run only at import (no test executes it afterwards): every test may see it
            chosen = chosen or list(self.lines)
        return sorted(chosen, key=self.seconds.__getitem__)

    def run(self, mutant: Mutant, fresh: bool) -> tuple[int | None, float, int]:
        """(exit code or None on timeout, seconds, tests selected); `fresh`: a fresh import
        (from a parent without the tests imported), else the code swapped in (exit DEFER where
        it cannot be)."""
        tests = self.tests_for(mutant)
        if not tests:
            return 0, 0.0, 0
        budget = self.args.timeout_factor * sum(self.seconds[t] for t in tests)
        timeout = budget + self.args.timeout_slack
        if fresh:
            job = _fresh_import(self.module, self.path, mutant.source, tests)
        else:
            module = sys.modules[self.module]

            def job() -> int:
                if not selection.swap_code(module, mutant.source):
                    return DEFER
                return _pytest(["-x", *tests])

        code, seconds = _wait(_fork(job, self.log), timeout)
        return code, seconds, len(tests)

    def save(self, path: Path) -> None:
        path.write_text(json.dumps({"lines": {k: sorted(v) for k, v in self.lines.items()},
                                    "seconds": self.seconds}))  # fmt: skip

    def load(self, path: Path) -> None:
        data = json.loads(path.read_text())
        self.lines = {k: set(v) for k, v in data["lines"].items()}
        self.seconds = data["seconds"]


def _module_parent(module: str, path: str, tests: list[str], todo: list[Mutant], args,
                   log: Path, equivalent: dict[str, str]) -> int:
    """The job of a module's parent: import its tests, map them, run the mutants that can be
    swapped in; the others are left (`log`.deferred) to the top parent's fresh imports."""
    started = time.monotonic()
    saved = _redirect(log)
    _pytest(["--collect-only", "-k", DESELECT, *tests])  # imports the test modules once
    _restore(saved)
    importlib.import_module(module)
    gc.freeze()
    run = _Module(module, path, tests, args, log)
    map_seconds = run.map_tests()
    print(f"{module}: {len(todo)} mutants, {len(run.lines)} tests, map {map_seconds:.1f} s",
          flush=True)
    deferred = []
    for mutant in todo:
        # A statement no test executes may still run at import (a table computed by a
        # function when the module loads): a fresh import finds whether a test sees it.
        if mutant.line not in run.in_function or not run.tests_for(mutant):
            deferred.append(mutant.key)
            continue
        code, seconds, selected = run.run(mutant, fresh=False)
        if code == DEFER:
            deferred.append(mutant.key)
            continue
        _record(run, mutant, code, seconds, selected, equivalent)
    Path(f"{log}.deferred").write_text("\n".join(deferred))
    print(f"{module}: swapped mutants done in {time.monotonic() - started:.0f} s", flush=True)
    return 0


def _record(run: _Module, mutant: Mutant, code, seconds, selected, equivalent) -> None:
    status = "killed" if code != 0 else "survived"
    if status == "survived" and run.args.confirm and selected:
        job = _fresh_import(run.module, run.path, mutant.source, _by_speed(run.tests, run))
        code, more = _wait(_fork(job, run.log), 7200)
        seconds += more
        status = "killed" if code != 0 else "survived"
    if status == "survived" and mutant.key in equivalent:
        status = "equivalent"
    with run.args.out.open("a") as out:
        out.write(json.dumps({"key": mutant.key, "line": mutant.line,
                              "change": mutant.description, "status": status,
                              "tests": selected, "timeout": code is None,
                              "seconds": round(seconds, 1)}) + "\n")  # fmt: skip
    if status != "killed":
        print(f"  {status}: {mutant.key} ({mutant.description}; {selected} tests)", flush=True)


def _by_speed(files: list[str], run: _Module) -> list[str]:
    """The module's test files, the file whose tests are fastest in total first."""
    total = {f: sum(s for k, s in run.seconds.items() if k.startswith(f + "::")) for f in files}
    return ["-k", DESELECT, *sorted(files, key=total.__getitem__)]


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
    parser.add_argument("--timeout-slack", type=float, default=20.0)
    parser.add_argument("--confirm", action="store_true",
                        help="run each survivor again against every test file of its module")
    parser.add_argument("--out", type=Path, default=ROOT / "tools/mutation/results.jsonl")
    args = parser.parse_args(argv)
    _preload()
    only = None
    if args.only:
        only = {line.split()[0] for line in args.only.read_text().splitlines() if line.strip()}
    equivalent = _equivalents()
    log = Path(os.environ.get("TMPDIR", "/tmp")) / f"mutation-{os.getpid()}.log"
    started = time.monotonic()
    args.out.write_text("")
    for module, (path, tests) in COVERAGE.items():
        if args.module and module not in args.module:
            continue
        tests = [t for t in tests if (ROOT / t).exists()]
        if args.baseline_tests:
            tests = [t for t in tests if t not in NEW_TESTS]
        todo = [m for m in mutants(module, (ROOT / path).read_text())
                if only is None or m.key in only]  # fmt: skip
        todo = _select(todo, args)
        if not todo:
            continue
        job = lambda: _module_parent(module, path, tests, todo, args, log, equivalent)  # noqa: E731, B023
        code, _ = _wait(_fork(job, None), 6 * 3600)
        if code != 0:
            print(f"{module}: the module run failed (exit {code}); see {log}")
            return 2
        run = _Module(module, path, tests, args, log)
        run.load(Path(f"{log}.map.json"))
        deferred = set(Path(f"{log}.deferred").read_text().split())
        for mutant in (m for m in todo if m.key in deferred):
            code, seconds, selected = run.run(mutant, fresh=True)
            _record(run, mutant, code, seconds, selected, equivalent)
        print(f"{module}: {len(deferred)} fresh-import mutants done", flush=True)
    totals = {"killed": 0, "survived": 0, "equivalent": 0}
    for line in args.out.read_text().splitlines():
        totals[json.loads(line)["status"]] += 1
    counted = totals["killed"] + totals["survived"]
    score = 100.0 * totals["killed"] / counted if counted else 100.0
    print(f"killed {totals['killed']}, survived {totals['survived']}, equivalent "
          f"{totals['equivalent']}: score {score:.1f} % in {time.monotonic() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
