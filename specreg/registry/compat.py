"""Entry points shaped like SGLang's, for users who migrate."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specreg.contract.config import SpecConfig
from specreg.contract.phase import Phase
from specreg.registry.registry import Registry


def resolve_num_tokens_per_req(
    *,
    phase: Phase | str,
    config: SpecConfig | Mapping[str, Any],
    is_draft_worker: bool = False,
    registry: Registry | None = None,
) -> int:
    """The per-request token width of `phase`, like SGLang's function of this name.

    Resolves the config through the (shared) registry each call: fine at startup, but a serving
    loop should resolve once and keep the `SpecPlan`.
    """
    checked = Phase.parse(phase)
    plan = (registry or Registry.load()).resolve(config)
    return plan.num_tokens_per_req(checked, is_draft_worker)
