"""Several runs of one framework script for the price of one framework import.

A framework import (SGLang, vLLM, with torch) costs seconds of CPU; a script run once per
adapter mode (SPECREG_SGLANG unset, enforce, shadow, ...) paid it once per mode. Here the
parent process imports what every run needs, then forks one child per run, each with its own
environment variables set before it runs: a child starts from a process that has imported the
framework but no plugin (specreg is not imported in the parent: the check below fails the run
otherwise), so it loads the plugins under its own mode, as a fresh process would. The children
run at once, each writing its result to a file; the parent prints {run name: result} as one
JSON line, or fails naming every run that raised.

Runs inside the pinned framework environment, next to the scripts that use it (standard library
only). A script calls `main(preload, run)`: `preload()` imports, `run(payload)` returns the
JSON-able result of one run. Stdin: {"payload": ..., "runs": {name: {"env": {variable: value,
or null to unset}, "argv": [the script's arguments in that run], "payload": (optional) this
run's own payload instead of the shared one}}}.
"""

from __future__ import annotations

import json
import os
import sys
import tempfile
import traceback
from collections.abc import Callable
from typing import Any

#: Top-level packages a child must import itself (under its own environment), never the parent:
#: specreg and its plugins (specreg_eagle, specreg_ngram, ...).
CHILD_ONLY_PREFIX = "specreg"


def _child(spec: dict[str, Any], run: Callable[[Any], Any], payload: Any, path: str) -> None:
    try:
        for name, value in spec.get("env", {}).items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value
        sys.argv = [sys.argv[0], *spec.get("argv", [])]
        data = {"ok": run(spec.get("payload", payload))}
    except BaseException:  # noqa: BLE001 - reported to the parent, which fails the run
        data = {"error": traceback.format_exc()}
    try:
        with open(path, "w") as out:
            json.dump(data, out)
        sys.stdout.flush()
        sys.stderr.flush()
    finally:
        os._exit(0)


def run_all(payload: Any, runs: dict[str, dict[str, Any]],
            preload: Callable[[], None], run: Callable[[Any], Any]) -> dict[str, Any]:
    """`run(payload)` once per entry of `runs`, each in a child forked after `preload()`."""
    preload()
    early = sorted(m for m in sys.modules if m.split(".")[0].startswith(CHILD_ONLY_PREFIX))
    if early:
        raise RuntimeError(f"the shared import loaded {early[:5]}: each run must import it itself")
    folder = tempfile.mkdtemp(prefix="specreg-one-import-")
    children = {}
    for name, spec in runs.items():
        path = os.path.join(folder, f"{len(children)}.json")
        sys.stdout.flush()
        sys.stderr.flush()
        pid = os.fork()
        if pid == 0:
            _child(spec, run, payload, path)
        children[name] = (pid, path)
    out, failed = {}, []
    for name, (pid, path) in children.items():
        _, status = os.waitpid(pid, 0)
        try:
            with open(path) as done:
                data = json.load(done)
        except (OSError, ValueError):
            data = {"error": f"no result (wait status {status})"}
        finally:
            if os.path.exists(path):
                os.unlink(path)
        if "error" in data:
            failed.append(f"run {name!r} ({runs[name]}):\n{data['error']}")
        else:
            out[name] = data["ok"]
    os.rmdir(folder)
    if failed:
        raise RuntimeError("\n".join(failed))
    return out


def main(preload: Callable[[], None], run: Callable[[Any], Any]) -> None:
    request = json.load(sys.stdin)
    out = run_all(request["payload"], request["runs"], preload, run)
    sys.stdout.write("\n" + json.dumps(out) + "\n")
