"""Fixtures of the framework parity tests: the pinned environment, reporting its build's
progress on the terminal, and the parity grids run once per change of the code they depend on,
all frameworks at once (the tiny model folders, `model_dirs`, come from tests/conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from tests.adapters.envs import FrameworkEnv, FrameworkEnvError, cache_root, ensure_env
from tests.adapters.parity import BUILT_IN_PLUGINS

HERE = Path(__file__).resolve().parent


@pytest.fixture(scope="session")
def framework_env(request) -> FrameworkEnv:
    capture = request.config.pluginmanager.getplugin("capturemanager")

    def progress(line: str) -> None:  # shown live, also under pytest's output capture
        with capture.global_and_fixture_disabled():
            print(f"\n[framework env] {line}", file=sys.stderr, flush=True)

    try:
        return ensure_env(progress=progress)
    except FrameworkEnvError as exc:
        pytest.fail(str(exc), pytrace=False)


def run_in_env(
    env: FrameworkEnv, script: str, payload: Any, timeout: float = 900,
    args: tuple[str, ...] = (), **extra: str,
) -> Any:
    """Run a script in the framework environment with `payload` as JSON on stdin; its JSON stdout."""
    result = subprocess.run(
        [str(env.python), script, *args], input=json.dumps(payload), capture_output=True, text=True,
        timeout=timeout, env=env.subprocess_env(**extra),
    )
    if result.returncode != 0:
        raise AssertionError(f"{script} failed ({result.returncode}):\n{result.stderr[-4000:]}")
    return json.loads(result.stdout.strip().splitlines()[-1])


#: The adapter modes the load tests (test_sglang_adapter, test_vllm_adapter) observe: the
#: variable unset, enforce, shadow, and a mistyped mode.
MODES = (None, "enforce", "shadow", "enforced")


def runs_per_mode(env: FrameworkEnv, script: str, payload: Any, variable: str,
                  modes: tuple[str | None, ...] = MODES) -> Any:
    """`run(mode)`: the script's output with `variable` set to mode (None: unset). The first call
    runs every mode of `modes` in one framework process, which imports the framework once and
    forks a child per mode (tests/adapters/one_import.py), since a framework import takes
    seconds."""
    done: dict[str | None, Any] = {}

    def run(mode: str | None) -> Any:
        assert mode in modes, f"{mode!r} is not one of the modes run: {modes}"
        if not done:
            runs = {str(m): {"env": {variable: m}} for m in modes}
            out = run_in_env(env, script, {"payload": payload, "runs": runs}, args=("--runs",))
            done.update({m: out[str(m)] for m in modes})
        return done[mode]

    return run


@pytest.fixture(scope="session")
def parity_models() -> dict[str, Path]:
    """The grids' model folders, at a path fixed by their configs (under the framework cache),
    so that every worker and session gives the frameworks the same input (tests.adapters.run_cache)."""
    from tests.adapters.parity import models_digest, write_models

    return write_models(cache_root() / "parity-models" / models_digest())


#: SGLang's parity runs: name -> (grid script arguments, environment variables). The adapter off
#: (the plugins not loaded), enforce, and shadow, which must compute exactly what SGLang alone
#: computes (test_sglang_shadow).
SGLANG_RUNS: dict[str, tuple[tuple[str, ...], dict[str, str]]] = {
    "sglang": ((), {}),
    "sglang-enforce": (("--load-plugins",),
                       {"SPECREG_SGLANG": "enforce", "SPECREG_PLUGINS": ",".join(BUILT_IN_PLUGINS)}),
    "sglang-shadow": (("--load-plugins",),
                      {"SPECREG_SGLANG": "shadow", "SPECREG_PLUGINS": ",".join(BUILT_IN_PLUGINS)}),
}


@pytest.fixture(scope="session")
def parity_runs(request, framework_env, parity_models, tmp_path_factory) -> dict[str, Any]:
    """Every parity grid's framework run: name -> output. Two subprocesses, started together so
    they share the machine's cores: vLLM's grid, and SGLang's, which imports SGLang once and
    forks one child per run of SGLANG_RUNS. Computed once per change of the code or the grid
    (tests.adapters.run_cache): a second worker, or a later session, reads the stored output."""
    from tests.adapters.parity import cases_of, framework_inputs
    from tests.adapters.run_cache import cached

    sglang_runs = {name: {"env": env, "argv": list(args)} for name, (args, env) in SGLANG_RUNS.items()}
    commands = {
        "sglang": (["--runs"], {"payload": framework_inputs("sglang", cases_of("sglang"), parity_models),
                                "runs": sglang_runs}),
        "vllm": ([], framework_inputs("vllm", cases_of("vllm"), parity_models)),
    }
    scripts = {name: HERE / f"{name}_grid.py" for name in commands}

    def compute() -> dict[str, Any]:
        folder, procs = tmp_path_factory.mktemp("parity-runs"), {}
        for name, (args, payload) in commands.items():
            (folder / f"{name}.in").write_text(json.dumps(payload))
            script = str(framework_env.checkout / "tests" / "adapters" / f"{name}_grid.py")
            with (folder / f"{name}.in").open() as stdin, (folder / f"{name}.out").open("w") as stdout, \
                    (folder / f"{name}.err").open("w") as stderr:
                proc = subprocess.Popen([str(framework_env.python), script, *args], stdin=stdin,
                                        stdout=stdout, stderr=stderr,
                                        env=framework_env.subprocess_env())
            procs[name] = (proc, script)
        out: dict[str, Any] = {}
        for name, (proc, script) in procs.items():
            if proc.wait(timeout=1800) != 0:
                stderr = (folder / f"{name}.err").read_text()
                pytest.fail(f"{script} ({name}) failed ({proc.returncode}):\n{stderr[-4000:]}")
            found = json.loads((folder / f"{name}.out").read_text().strip().splitlines()[-1])
            out.update(found if name == "sglang" else {name: found})
        return out

    started = time.monotonic()
    out, read = cached(framework_env, "parity", [*scripts.values(), HERE / "one_import.py"],
                       commands, compute)
    capture = request.config.pluginmanager.getplugin("capturemanager")
    with capture.global_and_fixture_disabled():
        how = "read back (unchanged code and grid)" if read else "computed"
        print(f"\n[parity runs] {how} in {time.monotonic() - started:.0f} s", file=sys.stderr,
              flush=True)
    return {**out, "seconds": time.monotonic() - started}
