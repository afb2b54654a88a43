"""Builds the pinned SGLang/vLLM virtual environment once, and shows it one checkout at a time.

The environment holds sglang and vllm installed with ``--no-deps`` next to the CPU torch, Triton,
specreg's own dependencies and the pure-Python requirement lists kept beside this module. It is
built once under the user's cache directory, keyed by a hash of those pins and files (nothing of
any checkout is installed into it), and reused by every later run; a file lock keeps parallel
test processes from building it twice, and the build reports each step and how far it got.

A checkout reaches the framework subprocesses by its own path: `PYTHONPATH` names the checkout
(specreg, the built-in plugins, the example ngram plugin) after a small overlay directory, keyed
by a hash of the checkout's path, that holds one ``.dist-info`` per distribution with the entry
points of this checkout's pyproject files. The frameworks' plugin loaders read entry points
through ``importlib.metadata``, so they find this checkout's adapters, and two checkouts testing
at once never import each other's code.
"""

from __future__ import annotations

import fcntl
import fnmatch
import hashlib
import json
import os
import re
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import attrs
import tomllib

HERE = Path(__file__).resolve().parent
REPO_ROOT = HERE.parents[1]
REQUIREMENTS_DIR = HERE / "requirements"
STUBS_DIR = HERE / "stubs"
EXAMPLE_PLUGIN = REPO_ROOT / "examples" / "specreg-ngram"

FRAMEWORK_PINS = ("sglang==0.5.23", "vllm==0.33.0")
RUNTIME_PINS = ("torch==2.13.0", "triton==3.8.0")
#: specreg's own dependencies besides torch and attrs (attrs is in SGLang's requirement list).
SPECREG_PINS = ("pluggy==1.6.0",)
REQUIREMENT_FILES = (
    "sglang-0.5.23-cpu-requirements.txt",
    "vllm-0.33.0-cpu-extra-requirements.txt",
)
BUILDER_VERSION = "2"
PIP_TIMEOUT_S = 3600
PROGRESS_EVERY_S = 10.0
#: Distributions a checkout provides: (project folder, the folders its packages live in).
CHECKOUT_PROJECTS = (
    (REPO_ROOT, (REPO_ROOT, REPO_ROOT / "plugins")),
    (EXAMPLE_PLUGIN, (EXAMPLE_PLUGIN,)),
)

Progress = Callable[[str], None]


class FrameworkEnvError(RuntimeError):
    """The pinned framework environment could not be built; the message says which step failed."""


def print_progress(line: str) -> None:
    print(f"[framework env] {line}", file=sys.stderr, flush=True)


@attrs.frozen
class FrameworkEnv:
    """A built environment, the checkout it runs and the overlay that carries its entry points."""

    root: Path
    build_seconds: float
    overlay: Path
    checkout: Path = REPO_ROOT

    @property
    def python(self) -> Path:
        return self.root / "bin" / "python"

    def import_path(self) -> list[Path]:
        """PYTHONPATH of a framework subprocess: stand-ins, the overlay, then the checkout."""
        code = [folder for _, folders in checkout_projects(self.checkout) for folder in folders]
        return [STUBS_DIR, self.overlay, *code]

    def subprocess_env(self, **extra: str) -> dict[str, str]:
        """The environment variables a framework subprocess runs with."""
        env = {k: v for k, v in os.environ.items() if not k.startswith(("SPECREG_", "SGLANG_", "VLLM_"))}
        env.pop("PYTHONPATH", None)
        env.pop("VIRTUAL_ENV", None)
        env["PYTHONPATH"] = os.pathsep.join(map(str, self.import_path()))
        env["PYTHONNOUSERSITE"] = "1"
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
    """The heavy environment's key: the builder, the Python minor version, pins and lists."""
    digest = hashlib.sha256()
    digest.update(BUILDER_VERSION.encode())
    digest.update(f"{sys.version_info.major}.{sys.version_info.minor}".encode())
    for pin in FRAMEWORK_PINS + RUNTIME_PINS + SPECREG_PINS:
        digest.update(pin.encode())
    for name in REQUIREMENT_FILES:
        digest.update((REQUIREMENTS_DIR / name).read_bytes())
    return digest.hexdigest()[:16]


def checkout_key(checkout: Path) -> str:
    return hashlib.sha256(str(checkout.resolve()).encode()).hexdigest()[:16]


def checkout_projects(checkout: Path) -> tuple[tuple[Path, tuple[Path, ...]], ...]:
    """`CHECKOUT_PROJECTS` for another checkout root (the same layout)."""
    return tuple(
        (checkout / project.relative_to(REPO_ROOT),
         tuple(checkout / folder.relative_to(REPO_ROOT) for folder in folders))
        for project, folders in CHECKOUT_PROJECTS
    )


# ---------------------------------------------------------------------- the per-checkout overlay
def top_level(pyproject: Path, folders: tuple[Path, ...]) -> list[str]:
    """The top-level packages setuptools would install from the project: its `packages` list,
    or the `packages.find` include patterns matched in `folders`."""
    setuptools = tomllib.loads(pyproject.read_text()).get("tool", {}).get("setuptools", {})
    packages = setuptools.get("packages", {})
    if isinstance(packages, list):
        return sorted({name.split(".")[0] for name in packages})
    patterns = [p for p in packages.get("find", {}).get("include", ["*"]) if "." not in p]
    found = {
        d.name for folder in folders if folder.is_dir() for d in folder.iterdir()
        if (d / "__init__.py").is_file() and any(fnmatch.fnmatch(d.name, p) for p in patterns)
    }
    return sorted(found)


def dist_info(pyproject: Path, folders: tuple[Path, ...] = ()) -> tuple[str, dict[str, str]]:
    """The ``.dist-info`` folder name and files for the project `pyproject` describes
    (``top_level.txt`` too: specreg reads it to know its shipped plugins' packages)."""
    project = tomllib.loads(pyproject.read_text())["project"]
    name, version = project["name"], project["version"]
    lines = []
    groups = dict(project.get("entry-points", {}))
    if project.get("scripts"):
        groups = {"console_scripts": project["scripts"], **groups}
    for group, entries in groups.items():
        lines.append(f"[{group}]")
        lines += [f"{key} = {value}" for key, value in entries.items()]
        lines.append("")
    metadata = f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"
    folder = f"{re.sub(r'[-_.]+', '_', name)}-{version}.dist-info"
    packages = "".join(f"{name}\n" for name in top_level(pyproject, folders))
    return folder, {"METADATA": metadata, "entry_points.txt": "\n".join(lines),
                    "top_level.txt": packages, "INSTALLER": "specreg-tests-overlay\n"}


def write_overlay(base: Path, checkout: Path = REPO_ROOT) -> Path:
    """The overlay of `checkout` under `base`, (re)written from its pyproject files."""
    overlay = base / "checkouts" / checkout_key(checkout)
    wanted: dict[str, dict[str, str]] = {}
    for project, folders in checkout_projects(checkout):
        folder, files = dist_info(project / "pyproject.toml", folders)
        wanted[folder] = files
    overlay.mkdir(parents=True, exist_ok=True)
    for stale in overlay.glob("*.dist-info"):
        if stale.name not in wanted:
            subprocess.run(["rm", "-rf", str(stale)], check=True)
    for folder, files in wanted.items():
        (overlay / folder).mkdir(exist_ok=True)
        for name, text in files.items():
            path = overlay / folder / name
            if not path.exists() or path.read_text() != text:
                path.write_text(text)
    (overlay / "checkout.txt").write_text(f"{checkout.resolve()}\n")
    return overlay


# ---------------------------------------------------------------------- the heavy environment
def _run(step: str, cmd: list[str], log: Path, progress: Progress | None = None) -> None:
    """Run one build step into `log`; every PROGRESS_EVERY_S, report what pip got to."""
    started = time.monotonic()
    with log.open("a") as out:
        out.write(f"\n$ {' '.join(cmd)}\n")
        out.flush()
        offset = log.stat().st_size
        process = subprocess.Popen(cmd, stdout=out, stderr=subprocess.STDOUT)
        while True:
            try:
                returncode = process.wait(timeout=PROGRESS_EVERY_S)
                break
            except subprocess.TimeoutExpired:
                if time.monotonic() - started > PIP_TIMEOUT_S:
                    process.kill()
                    returncode = process.wait()
                    break
                if progress is not None:
                    progress(f"  ... {_pip_state(log, offset)}, {time.monotonic() - started:.0f} s")
    if returncode != 0:
        tail = "".join(log.read_text().splitlines(keepends=True)[-25:])
        raise FrameworkEnvError(
            f"building the pinned framework environment failed at step '{step}' "
            f"(exit {returncode}); full log: {log}\n{tail}"
        )


def _pip_state(log: Path, offset: int) -> str:
    """How far pip got in the log written since `offset`: packages collected, the last line."""
    with log.open("rb") as read:
        read.seek(offset)
        text = read.read().decode(errors="replace")
    collected = len(re.findall(r"^(?:Collecting|Processing|Requirement already) ", text, re.M))
    installing = "installing the collected packages" if "Installing collected" in text else ""
    return ", ".join(filter(None, [f"{collected} packages collected", installing]))


def _build(target: Path, log: Path, progress: Progress) -> None:
    pip = [str(target / "bin" / "python"), "-m", "pip", "install", "--no-input", "--progress-bar", "off"]
    requirement_args = [arg for name in REQUIREMENT_FILES for arg in ("-r", str(REQUIREMENTS_DIR / name))]
    count = sum(
        1 for name in REQUIREMENT_FILES for line in (REQUIREMENTS_DIR / name).read_text().splitlines()
        if line.strip() and not line.startswith("#")
    )
    steps = [
        ("create venv", [sys.executable, "-m", "venv", str(target)]),
        (f"install torch, triton, specreg's dependencies and {count} pinned requirements",
         pip + ["--no-deps", *RUNTIME_PINS, *SPECREG_PINS, *requirement_args]),
        ("install sglang and vllm without dependencies", pip + ["--no-deps", *FRAMEWORK_PINS]),
    ]
    for number, (step, cmd) in enumerate(steps, start=1):
        progress(f"step {number}/{len(steps) + 1}: {step}")
        _run(step, cmd, log, progress)


def ensure_env(progress: Progress = print_progress, checkout: Path = REPO_ROOT) -> FrameworkEnv:
    """Return the built environment for `checkout`, building it first (once, under a lock)."""
    base = cache_root()
    base.mkdir(parents=True, exist_ok=True)
    key = env_key()
    root = base / key
    log = base / f"{key}.log"
    with (base / f"{key}.lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        done = root / "build.json"
        if not done.exists():
            progress(f"building the pinned SGLang/vLLM environment in {root} (once per pin set, "
                     f"about 3 GB, minutes); pip log: {log}")
            staging = base / f"{key}.building"
            if staging.exists():
                subprocess.run(["rm", "-rf", str(staging)], check=True)
            log.write_text("")
            started = time.monotonic()
            _build(staging, log, progress)
            if root.exists():
                subprocess.run(["rm", "-rf", str(root)], check=True)
            # A venv's scripts name its own path, so it is built where it will live.
            staging.rename(root)
            progress("step 4/4: recreate the venv's scripts at the final path")
            _run("recreate venv scripts at the final path",
                 [sys.executable, "-m", "venv", "--upgrade", str(root)], log)
            done.write_text(json.dumps({"build_seconds": time.monotonic() - started}))
            progress(f"built in {time.monotonic() - started:.0f} s: {root}")
        overlay = write_overlay(base, checkout)
    return FrameworkEnv(root=root, build_seconds=json.loads(done.read_text())["build_seconds"],
                        overlay=overlay, checkout=checkout)


if __name__ == "__main__":
    built = ensure_env()
    print(json.dumps({"root": str(built.root), "build_seconds": built.build_seconds,
                      "overlay": str(built.overlay)}))
