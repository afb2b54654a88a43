"""`PluginInfo`: what a plan and `specreg list` say about one loaded plugin."""

from __future__ import annotations

from typing import Any

import attrs

#: Imports that take longer than this many seconds are reported as slow.
SLOW_IMPORT_SECONDS = 1.0


@attrs.frozen(kw_only=True)
class PluginInfo:
    """A loaded plugin: its name, distribution, version and the hooks it implements."""

    name: str
    distribution: str | None
    version: str | None
    hooks: tuple[str, ...]
    load_seconds: float | None = None

    @property
    def slow(self) -> bool:
        """Its import took longer than SLOW_IMPORT_SECONDS."""
        return self.load_seconds is not None and self.load_seconds > SLOW_IMPORT_SECONDS

    def to_dict(self) -> dict[str, Any]:
        return {**attrs.asdict(self), "slow": self.slow}
