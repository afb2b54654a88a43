"""Framework runs computed once and read back: the parity grids' outputs on disk, keyed by a
hash of everything they depend on.

A framework run's output is a function of the pinned environment (its key), the checkout (its
path, and the code the subprocess imports from it: specreg, the built-in plugins, the example
plugin, tools, the stand-ins, the pyproject files whose entry points the overlay carries), the
script, its input, its arguments and the variables each run sets. The key hashes all of them, so
a run is recomputed as soon as any of them changes, and read back otherwise: by a second
pytest-xdist worker that asks in the same session, and by a later session on unchanged code. A
file lock per key makes the first asker compute while the others wait, then read.

The results live beside the framework environment, under `cache_root()/runs`; entries unread
for PRUNE_AFTER_DAYS are deleted. `SPECREG_FRAMEWORK_RUNS=fresh` recomputes (and rewrites)
every entry it is asked for.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import time
from collections.abc import Callable, Iterable
from pathlib import Path
from typing import Any

from tests.adapters.envs import STUBS_DIR, FrameworkEnv, cache_root, checkout_projects

PRUNE_AFTER_DAYS = 14
SKIPPED_PARTS = ("__pycache__", ".egg-info", ".pytest_cache", ".mypy_cache", ".ruff_cache")


def _files(folders: Iterable[Path]) -> list[Path]:
    found = []
    for folder in folders:
        for path in folder.rglob("*"):
            if path.is_file() and not any(p.endswith(SKIPPED_PARTS) for p in path.parts):
                found.append(path)
    return sorted(set(found))


def code_files(env: FrameworkEnv, scripts: Iterable[Path]) -> list[Path]:
    """Every file a framework subprocess of `env` may import from the checkout: the checkout's
    packages and pyproject files, the stand-ins, and the scripts with their sibling helpers."""
    projects = checkout_projects(env.checkout)
    folders = [folder / name for _, folders in projects for folder in folders
               for name in _packages(folder)]
    pyprojects = [project / "pyproject.toml" for project, _ in projects]
    return _files([*folders, STUBS_DIR]) + sorted(set(pyprojects) | set(scripts))


def _packages(folder: Path) -> list[str]:
    return sorted(d.name for d in folder.iterdir() if (d / "__init__.py").is_file()
                  and d.name != "tests")


def run_key(env: FrameworkEnv, scripts: Iterable[Path], inputs: Any) -> str:
    """The hash of the environment's key, the checkout's path, its code and the inputs (JSON,
    sorted keys)."""
    digest = hashlib.sha256()
    digest.update(env.root.name.encode())
    digest.update(str(env.checkout.resolve()).encode())  # on the subprocess's path, in its messages
    for path in code_files(env, scripts):
        name = path.relative_to(env.checkout) if path.is_relative_to(env.checkout) else path
        digest.update(f"\0{name}\0".encode())
        digest.update(path.read_bytes())
    digest.update(json.dumps(inputs, sort_keys=True, default=str).encode())
    return digest.hexdigest()[:24]


def cached(env: FrameworkEnv, name: str, scripts: Iterable[Path], inputs: Any,
           compute: Callable[[], Any]) -> tuple[Any, bool]:
    """`compute()`'s JSON-able output, or the one stored under the same key: (output, read)."""
    scripts = [Path(s) for s in scripts]
    folder = cache_root() / "runs"
    folder.mkdir(parents=True, exist_ok=True)
    key = f"{name}-{run_key(env, scripts, inputs)}"
    path = folder / f"{key}.json"
    with (folder / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if path.exists() and os.environ.get("SPECREG_FRAMEWORK_RUNS") != "fresh":
            os.utime(path)
            return json.loads(path.read_text()), True
        out = compute()
        staging = folder / f"{key}.{os.getpid()}.tmp"
        staging.write_text(json.dumps(out))
        os.replace(staging, path)
    _prune(folder)
    return out, False


def _prune(folder: Path) -> None:
    """Delete the entries (and their locks) unread for PRUNE_AFTER_DAYS."""
    old = time.time() - PRUNE_AFTER_DAYS * 86400
    for path in folder.glob("*.json"):
        try:
            if path.stat().st_mtime < old:
                path.unlink()
                path.with_suffix(".lock").unlink(missing_ok=True)
        except FileNotFoundError:
            pass

