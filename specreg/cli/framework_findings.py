"""The framework's own rules applied to the sizes a config resolves to: what `specreg check` adds.

The translation's notices, and SGLang's HiSparse runtime rules for the resolved width and topk
(no object is built, so nothing heavy is imported).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from specreg.errors import Problem, SpecRegError
from specreg.framework_args.rules import hisparse_runtime_problems
from specreg.contract.phase import Phase
from specreg.registry.translate import config_from_flags


def framework_findings(
    registry: Any, data: Mapping[str, Any], *, substitutions_known: bool = True
) -> list[Problem]:
    """The translation's notices plus SGLang's HiSparse runtime rules for the resolved sizes.

    Problems the registry itself reports (bad values, unknown names) are not repeated here.
    `substitutions_known=False` (the command line named a substitution that does not exist)
    leaves out the rules that depend on which substitutions run.
    """
    try:
        config = config_from_flags(data)
    except SpecRegError:
        return []
    found = [n for n in config.notices if not n.is_error]  # errors: the registry reports
    if config.framework.get("enable_hisparse"):
        try:
            resolution = registry.resolution(config)
        except SpecRegError:
            return found
        found += hisparse_runtime_problems(
            config.framework, resolution.config.topk or 1,
            resolution.target[Phase.TARGET_VERIFY],
            resolution.config.substitutions if substitutions_known else None,
        )
    return found
