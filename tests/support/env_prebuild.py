"""Starting the framework environment's build in the background when a session will need it.

The build (tests/adapters/envs.py, under its file lock) takes a minute or two of pip; a session
that starts it at once and runs its framework tests last has both workers testing meanwhile,
where the first framework test would otherwise hold them on the lock. A worker that reaches the
lock before the build finishes waits for it as before, and one that arrives first builds it
itself (the background process then finds it built).
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
from pathlib import Path

import attrs

ADAPTER_TESTS = Path("tests") / "adapters"


@attrs.frozen
class Prebuild:
    """The background build: its process and the log its output goes to."""

    process: subprocess.Popen
    log: Path

    def stop(self) -> None:
        """Stop the build if it still runs (the next build removes its unfinished folder)."""
        if self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
        self.process.wait()


def includes_framework_tests(args: list[str], root: Path) -> bool:
    """Whether a run of `args` (pytest's file or folder arguments; none: the whole suite)
    collects from tests/adapters."""
    if not args:
        return True
    adapters = (root / ADAPTER_TESTS).resolve()
    for arg in args:
        path = (root / arg.split("::")[0]).resolve()
        if path == adapters or adapters in path.parents or path in adapters.parents:
            return True
    return False


def start_if_needed(args: list[str], root: Path) -> Prebuild | None:
    """Start `python -m tests.adapters.envs` in the background when the run includes the
    framework tests and the environment is not built; None otherwise."""
    from tests.adapters.envs import cache_root, env_key

    if not includes_framework_tests(args, root):
        return None
    base = cache_root()
    if (base / env_key() / "build.json").exists():
        return None
    base.mkdir(parents=True, exist_ok=True)
    log = base / f"{env_key()}.prebuild.log"
    with log.open("w") as out:
        process = subprocess.Popen([sys.executable, "-m", "tests.adapters.envs"], cwd=root,
                                   stdout=out, stderr=subprocess.STDOUT, start_new_session=True)
    print(f"\n[framework env] not built: building it in the background (log: {log}); "
          "tests/adapters run after tests/kernels", file=sys.stderr, flush=True)
    return Prebuild(process=process, log=log)
