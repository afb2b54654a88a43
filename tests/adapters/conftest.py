"""Fixtures of the framework parity tests: the pinned environment (the tiny model folders,
`model_dirs`, come from tests/conftest.py)."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from tests.adapters.envs import FrameworkEnv, FrameworkEnvError, ensure_env


@pytest.fixture(scope="session")
def framework_env() -> FrameworkEnv:
    try:
        return ensure_env()
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


def runs_per_mode(env: FrameworkEnv, script: str, payload: Any, variable: str) -> Any:
    """`run(mode)`: the script's output with `variable` set to mode (None: unset), each mode run
    once, since a framework import takes seconds."""
    done: dict[str | None, Any] = {}

    def run(mode: str | None) -> Any:
        if mode not in done:
            extra = {variable: mode} if mode else {}
            done[mode] = run_in_env(env, script, payload, **extra)
        return done[mode]

    return run
