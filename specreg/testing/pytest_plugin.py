"""specreg's pytest plugin (entry point `pytest11`): fixtures for plugin authors' test suites.

- `specreg_registry`: a fresh registry holding only the entry-point plugins named by the test's
  `@pytest.mark.specreg_plugins("name", ...)` marker (all entry points without the marker).
- `specreg_registry_factory`: `make(*in_process_plugins, entry_points=())` builds an isolated
  registry from in-process plugin objects and, optionally, named entry points.
- `specreg_conformance`: the kit, `specreg_conformance.check_algorithm(registry, name)` and
  `.check_cache(registry, name)`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from types import SimpleNamespace
from typing import Any

import pytest


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        "specreg_plugins(*names): entry-point plugins the specreg_registry fixture loads",
    )


@pytest.fixture
def specreg_registry(request: pytest.FixtureRequest) -> Any:
    from specreg.registry.registry import Registry

    marker = request.node.get_closest_marker("specreg_plugins")
    allowlist = frozenset(marker.args) if marker is not None else None
    registry = Registry.load(allowlist=allowlist, fresh=True)
    return registry


@pytest.fixture
def specreg_registry_factory() -> Callable[..., Any]:
    from specreg.registry.registry import Registry

    def make(*plugins: Any, entry_points: Iterable[str] = ()) -> Registry:
        names = frozenset(entry_points)
        registry = Registry.load(allowlist=names, fresh=True) if names else Registry()
        for i, plugin in enumerate(plugins):
            name = getattr(plugin, "__name__", None) or f"{type(plugin).__name__}-{i}"
            if registry.register_plugin(plugin, name) is None:
                raise AssertionError(f"plugin {name!r} was refused: {registry.failures[-1]}")
        return registry

    return make


@pytest.fixture
def specreg_conformance() -> SimpleNamespace:
    from specreg.testing.conformance import check_algorithm
    from specreg.testing.conformance_cache import check_cache

    return SimpleNamespace(check_algorithm=check_algorithm, check_cache=check_cache)
