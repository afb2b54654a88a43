"""Fixtures for the registry and CLI tests: the installable test distribution and isolated registries."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from specreg import Registry

TESTPLUGINS_SRC = Path(__file__).parent / "data" / "specreg-testplugins"


@pytest.fixture(scope="session")
def testplugins_site(tmp_path_factory) -> Path:
    """specreg-testplugins installed for real (pip --target), once per session."""
    target = tmp_path_factory.mktemp("site")
    build = tmp_path_factory.mktemp("build")
    subprocess.run(
        [
            sys.executable, "-m", "pip", "install", "-q", "--no-deps", "--no-build-isolation",
            "--target", str(target), str(TESTPLUGINS_SRC),
        ],
        check=True,
        cwd=build,
        env={"PIP_NO_INPUT": "1", "PATH": "/usr/bin:/bin", "HOME": str(build)},
    )
    return target


@pytest.fixture
def load_registry(testplugins_site, monkeypatch):
    """`load_registry(allowlist, strict=False)`: a fresh registry over real entry points."""
    monkeypatch.syspath_prepend(str(testplugins_site))
    monkeypatch.delenv("SPECREG_PLUGINS", raising=False)

    def _load(allowlist, *, strict: bool = False) -> Registry:
        return Registry.load(allowlist=allowlist, strict=strict, fresh=True)

    return _load
