"""The framework's own rules applied to the plan a config resolves to: what `specreg check` adds.

The translation's notices, and SGLang's HiSparse runtime rules for the plan's width and topk.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specreg.errors import Problem, SpecRegError
from specreg.framework_args.rules import hisparse_runtime_problems
from specreg.translate import config_from_flags


def framework_findings(registry: Any, data: Mapping[str, Any]) -> list[Problem]:
    """The translation's notices plus SGLang's HiSparse runtime rules for the resolved plan.

    Problems the registry itself reports (bad values, unknown names) are not repeated here.
    """
    try:
        config = config_from_flags(data)
    except SpecRegError:
        return []
    found = [n for n in config.notices if not n.is_error]  # errors: the registry reports
    if config.framework.get("enable_hisparse"):
        try:
            plan = registry.resolve(config)
        except SpecRegError:
            return found
        found += hisparse_runtime_problems(
            config.framework, plan.config.topk or 1, plan.num_tokens_per_req("target_verify"),
            plan.config.substitutions,
        )
    return found
