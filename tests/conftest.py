"""Test-session setup shared by every test directory: the Triton interpreter, the `--fuzz-long`
option with the hypothesis profile it selects, the fixtures several folders use, and how the
run splits over two workers (pytest-xdist, `-n 2 --dist loadgroup --no-loadscope-reorder` in
pyproject's addopts): each test file is one group, kept on one worker with its module fixtures,
the groups handed out in collection order as workers free up; the three test files that read the
parity grids' runs are one group. The framework environment and the parity runs are built once
on disk, under a file lock, and a second worker reads them (tests/adapters/envs.py,
tests/adapters/run_cache.py). Where the environment is not built yet, the session starts its
build in the background at once and runs tests/adapters after tests/kernels, so both workers
test the rest while it builds instead of waiting on its lock. Each worker runs torch on one thread, and so does every process
its tests start, so the two never fight over the machine's two cores.

Triton's interpreter must be switched on before triton is first imported, so it happens here, at
the top of the root conftest. CPU tensors still dispatch to the torch path unless a test forces
the Triton backend, so this changes nothing for the other tests.
"""

import os
from pathlib import Path

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402
from hypothesis import settings  # noqa: E402

from tests.support.models import model_dirs  # noqa: E402, F401 - tests/registry, tests/cli, tests/adapters
from tests.support.testplugins import load_registry, testplugins_site  # noqa: E402, F401

ROOT = Path(__file__).resolve().parents[1]
#: The session's background build of the framework environment (tests.support.env_prebuild).
PREBUILD = pytest.StashKey()


@pytest.fixture(scope="module")
def one_thread():
    """One intra-op torch thread for a module's tests (`pytestmark =
    pytest.mark.usefixtures("one_thread")`), also when run without workers: the row-sized ops
    of the production-shape tests and tiny model matrices run far slower with two threads
    spinning on a shared 2-core machine (measured: the params path, V 151,936, 512 requests,
    1.8 s on one thread, 38 s on two)."""
    import torch

    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(threads)


@pytest.fixture
def force_backend(monkeypatch):
    """Force the kernel backend for one test: `force_backend("triton")`."""

    def _force(name: str) -> None:
        monkeypatch.setenv("SPECREG_KERNEL_BACKEND", name)

    return _force


def pytest_addoption(parser):
    parser.addoption(
        "--fuzz-long",
        action="store_true",
        default=False,
        help="run every fuzz target with >= 10,000 hypothesis examples and the long load tests",
    )
    parser.addoption(
        "--lossless-full",
        action="store_true",
        default=False,
        help="run the chain lossless tests at V 151,936 on 566,600 requests per dtype (binned "
        "TV 0.005 detected with power 0.99; minutes of CPU per rule)",
    )


def pytest_configure(config) -> None:
    """Register the fuzz profiles; `--fuzz-long` loads the long one (tests.support.fuzz). Under
    pytest-xdist, one torch thread per worker, and one OpenMP thread for every process a test
    starts (the CLI and its child builds, `specreg demo`, the framework processes, a nested
    pytest), unless OMP_NUM_THREADS is set: a child on torch's default of one thread per core
    spins its OpenMP threads against the other worker (measured: `specreg demo --json` of
    test_demo took 46 s of CPU, 117 s wall, with the default; 8 s of CPU, 33 s wall, with one)."""
    from tests.support.fuzz import LONG_PROFILE, register_profiles

    if os.environ.get("PYTEST_XDIST_WORKER"):
        import torch

        torch.set_num_threads(1)
        os.environ.setdefault("OMP_NUM_THREADS", "1")
    register_profiles()
    if config.getoption("--fuzz-long", default=False):
        settings.load_profile(LONG_PROFILE)


#: The test files that read the session's parity runs (tests/adapters/conftest.py): one group, so
#: that one worker runs the grids while the other goes on with other files (a second worker
#: would read the runs back from tests.adapters.run_cache, after waiting for them).
PARITY_RUN_FILES = ("tests/adapters/test_sglang_parity.py", "tests/adapters/test_sglang_shadow.py",
                    "tests/adapters/test_vllm_parity.py")


def xdist_group(nodeid: str) -> str:
    """A test's xdist group: its file, or the parity-run group (module docstring)."""
    path = nodeid.split("::")[0]
    return "tests/adapters/parity runs" if path in PARITY_RUN_FILES else path


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(config, items) -> None:
    """xdist groups (module docstring). First among the hooks: pytest-xdist's worker hook turns
    the marks into the scheduler's groups (a nodeid suffix), so it must find them already there;
    after it, the marks group nothing and every test is scheduled alone, each worker then
    setting up the module and session fixtures of the tests it draws."""
    for item in items:
        item.add_marker(pytest.mark.xdist_group(xdist_group(item.nodeid)))
    items[:] = framework_tests_after_kernels(items)


def framework_tests_after_kernels(items: list) -> list:
    """`items` with the tests/adapters ones moved after the last tests/kernels one (module
    docstring), every other order kept."""
    adapters = [item for item in items if item.nodeid.startswith("tests/adapters/")]
    rest = [item for item in items if not item.nodeid.startswith("tests/adapters/")]
    kernels = [i for i, item in enumerate(rest) if item.nodeid.startswith("tests/kernels/")]
    at = kernels[-1] + 1 if kernels else 0
    return rest[:at] + adapters + rest[at:]


def pytest_sessionstart(session) -> None:
    """In the controlling process of a run that includes tests/adapters, start building the
    framework environment in the background when it is not built (module docstring)."""
    from tests.support.env_prebuild import start_if_needed

    if not hasattr(session.config, "workerinput"):
        session.config.stash[PREBUILD] = start_if_needed(session.config.args, ROOT)


def pytest_sessionfinish(session) -> None:
    """A background build the run turned out not to need stops with the session (its unfinished
    folder is removed by the next build)."""
    build = session.config.stash.get(PREBUILD, None)
    if build is not None:
        build.stop()


@pytest.hookimpl(wrapper=True)
def pytest_runtest_call(item):
    """The torch-path reference tests run under the device check (tests.support.device_check):
    a factory call without `device=` in specreg's or a plugin's code fails them."""
    from tests.support.device_check import DeviceNamed, checks

    if not checks(item.nodeid):
        return (yield)
    with DeviceNamed():
        return (yield)


@pytest.fixture
def fuzz_long(request) -> bool:
    """Whether `--fuzz-long` was given (the long load tests run longer under it)."""
    return bool(request.config.getoption("--fuzz-long", default=False))
