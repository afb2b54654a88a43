"""Builds and caches the pinned SGLang/vLLM virtual environment the parity tests run the real frameworks in.

The environment holds sglang and vllm installed with ``--no-deps`` next to the CPU torch, Triton and the
pure-Python requirement lists kept beside this module. It is built once under the user's cache
directory, keyed by a hash of the pins and the requirement files, and reused by every later run; a
file lock keeps parallel test processes from building it twice. The checkout under test is
installed into it editable, so the frameworks' own plugin loaders find specreg's entry points.
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import subprocess
import sys
import time
from pathlib import Path

import attrs

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
REQUIREMENTS_DIR = HERE / "requirements"
STUBS_DIR = HERE / "stubs"
EXAMPLE_PLUGIN = REPO_ROOT / "examples" / "specreg-ngram"

FRAMEWORK_PINS = ("sglang==0.5.23", "vllm==0.33.0")
RUNTIME_PINS = ("torch==2.13.0", "triton==3.8.0")
REQUIREMENT_FILES = (
    "sglang-0.5.23-cpu-requirements.txt",
    "vllm-0.33.0-cpu-extra-requirements.txt",
)
BUILDER_VERSION = "1"
PIP_TIMEOUT_S = 3600


class FrameworkEnvError(RuntimeError):
    """The pinned framework environment could not be built; the message says which step failed."""


@attrs.frozen
class FrameworkEnv:
    """A built environment: where it lives and how long its build took."""

    root: Path
    build_seconds: float

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def subprocess_env(self, **extra: str) -> dict[str, str]:
        """The environment variables a framework subprocess runs with (stand-ins first on the path)."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECREG_", "SGLANG_", "VLLM_"))}
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
        env["PYTHONPATH"] = str(STUBS_DIR)
        env["CUDA_VISIBLE_DEVICES"] = ""
        env["TOKENIZERS_PARALLELISM"] = "false"
        env.update(extra)
        return env


def cache_root() -> Path:
    override = os.environ.get("SPECREG_FRAMEWORK_CACHE")
    if override:
        return Path(override)
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "specreg" / "frameworks"


def env_key() -> str:
    digest = hashlib.sha256()
    digest.update(BUILDER_VERSION.encode())
    digest.update(f"{sys.version_info.major}.{sys.version_info.minor}".encode())
    for pin in FRAMEWORK_PINS + RUNTIME_PINS:
        digest.update(pin.encode())
    for name in REQUIREMENT_FILES:
        digest.update((REQUIREMENTS_DIR / name).read_bytes())
    return digest.hexdigest()[:16]


def _run(step: str, cmd: list[str], log: Path) -> None:
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        result = subprocess.run(cmd, stdout=out, stderr=subprocess.STDOUT, timeout=PIP_TIMEOUT_S)
    if result.returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-25:])
        raise FrameworkEnvError(
            f"building the pinned framework environment failed at step '{step}' "
            f"(exit {result.returncode}); full log: {log}\n{tail}"
        )


def _build(target: Path, log: Path) -> None:
    _run("create venv", [sys.executable, "-m", "venv", str(target)], log)
    pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--no-input"]
    requirement_args = [arg for name in REQUIREMENT_FILES for arg in ("-r", str(REQUIREMENTS_DIR / name))]
    _run("install torch, triton and requirement files",
         pip + ["--no-deps", *RUNTIME_PINS, *requirement_args], log)
    _run("install sglang and vllm without dependencies", pip + ["--no-deps", *FRAMEWORK_PINS], log)
    _run("install setuptools for the editable specreg install", pip + ["setuptools>=68", "wheel"], log)


def _install_checkout(root: Path, log: Path) -> None:
    """specreg and the example ngram plugin, editable from this checkout (once per checkout)."""
    marker = root / "specreg-checkout.txt"
    stamp = f"{REPO_ROOT}\n{(REPO_ROOT / 'pyproject.toml').read_text()}"
    if marker.exists() and marker.read_text() == stamp:
        return
    # With its own dependencies (pluggy; attrs and torch are already the pinned ones).
    _run("install specreg and the example ngram plugin from the checkout",
         [str(root / "bin" / "python"), "-m", "pip", "install", "--no-input",
          "--no-build-isolation", "-e", str(REPO_ROOT), "-e", str(EXAMPLE_PLUGIN)], log)
    marker.write_text(stamp)


def ensure_env() -> FrameworkEnv:
    """Return the built environment, building it first (once, under a lock) if it is missing."""
    base = cache_root()
    base.mkdir(parents=True, exist_ok=True)
    key = env_key()
    root = base / key
    log = base / f"{key}.log"
    with (base / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "build.json"
        if not done.exists():
            staging = base / f"{key}.building"
            if staging.exists():
                subprocess.run(["rm", "-rf", str(staging)], check=True)
            log.write_text("")
            started = time.monotonic()
            _build(staging, log)
            if root.exists():
                subprocess.run(["rm", "-rf", str(root)], check=True)
            # A venv's scripts name its own path, so it is built where it will live.
            staging.rename(root)
            _run("recreate venv scripts at the final path",
                 [sys.executable, "-m", "venv", "--upgrade", str(root)], log)
            done.write_text(json.dumps({"build_seconds": time.monotonic() - started}))
        _install_checkout(root, log)
    return FrameworkEnv(root=root, build_seconds=json.loads(done.read_text())["build_seconds"])


if __name__ == "__main__":
    built = ensure_env()
    print(json.dumps({"root": str(built.root), "build_seconds": built.build_seconds}))
