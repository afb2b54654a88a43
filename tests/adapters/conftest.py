"""Fixtures of the framework parity tests: the pinned environment, reporting its build's
progress on the terminal, and the parity grids run once per session, all frameworks at once
(the tiny model folders, `model_dirs`, come from tests/conftest.py)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from typing import Any

import pytest

from tests.adapters.envs import FrameworkEnv, FrameworkEnvError, ensure_env


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
def parity_models(tmp_path_factory):
    from tests.adapters.parity import write_models

    return write_models(tmp_path_factory.mktemp("parity-models"))


@pytest.fixture(scope="session")
def parity_runs(framework_env, parity_models, tmp_path_factory) -> dict[str, Any]:
    """Every parity grid's framework run, started together (one subprocess each, so the two
    frameworks and SGLang's enforce- and shadow-mode runs share the machine's cores): name ->
    output."""
    from tests.adapters.parity import BUILT_IN_PLUGINS, cases_of, framework_inputs

    runs = {
        "sglang": ("sglang", (), {}),
        "sglang-enforce": ("sglang", ("--load-plugins",),
                           {"SPECREG_SGLANG": "enforce", "SPECREG_PLUGINS": ",".join(BUILT_IN_PLUGINS)}),
        # shadow mode must compute exactly what SGLang alone computes (test_sglang_shadow)
        "sglang-shadow": ("sglang", ("--load-plugins",),
                          {"SPECREG_SGLANG": "shadow", "SPECREG_PLUGINS": ",".join(BUILT_IN_PLUGINS)}),
        "vllm": ("vllm", (), {}),
    }
    started, procs = time.monotonic(), {}
    folder = tmp_path_factory.mktemp("parity-runs")
    for name, (framework, args, extra) in runs.items():
        (folder / f"{name}.in").write_text(
            json.dumps(framework_inputs(framework, cases_of(framework), parity_models)))
        script = str(framework_env.checkout / "tests" / "adapters" / f"{framework}_grid.py")
        with (folder / f"{name}.in").open() as stdin, (folder / f"{name}.out").open("w") as stdout, \
                (folder / f"{name}.err").open("w") as stderr:
            proc = subprocess.Popen([str(framework_env.python), script, *args], stdin=stdin,
                                    stdout=stdout, stderr=stderr,
                                    env=framework_env.subprocess_env(**extra))
        procs[name] = (proc, script)
    out: dict[str, Any] = {}
    for name, (proc, script) in procs.items():
        if proc.wait(timeout=1800) != 0:
            stderr = (folder / f"{name}.err").read_text()
            pytest.fail(f"{script} ({name}) failed ({proc.returncode}):\n{stderr[-4000:]}")
        out[name] = json.loads((folder / f"{name}.out").read_text().strip().splitlines()[-1])
    out["seconds"] = time.monotonic() - started
    return out
