"""Test-session setup shared by every test directory.

Triton's interpreter must be switched on before triton is first imported, so it happens here, at
the top of the root conftest. CPU tensors still dispatch to the torch path unless a test forces
the Triton backend, so this changes nothing for the other tests.
"""

import os

os.environ.setdefault("TRITON_INTERPRET", "1")

import pytest  # noqa: E402


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
