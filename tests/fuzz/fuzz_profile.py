"""Hypothesis settings shared by the fuzz targets (CI counts vs the `--fuzz-long` profile)."""

from __future__ import annotations

from hypothesis import HealthCheck, settings

LONG_PROFILE = "specreg-fuzz-long"
LONG_EXAMPLES = 10_000
_SUPPRESS = (HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.filter_too_much)


def register_profiles() -> None:
    settings.register_profile(
        LONG_PROFILE,
        max_examples=LONG_EXAMPLES,
        deadline=None,
        derandomize=True,
        suppress_health_check=_SUPPRESS,
    )


def fuzz_long() -> bool:
    """True when pytest was started with --fuzz-long (the long profile is loaded)."""
    return settings.default.max_examples >= LONG_EXAMPLES


def fuzz_settings(ci_examples: int, long_examples: int = LONG_EXAMPLES) -> settings:
    """Deterministic settings: `ci_examples` in CI, `long_examples` under --fuzz-long."""
    return settings(
        max_examples=long_examples if fuzz_long() else ci_examples,
        deadline=None,
        derandomize=True,
        suppress_health_check=_SUPPRESS,
        database=None,
    )
