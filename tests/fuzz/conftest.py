"""Fuzz-test setup: the `--fuzz-long` option and the hypothesis profiles it selects.

CI runs each target with the small, derandomized example count its test passes to
`fuzz_profile.fuzz_settings`; `--fuzz-long` loads the `specreg-fuzz-long` profile, which raises every
target to at least `LONG_EXAMPLES` examples (still derandomized, so a failure replays).
"""

from __future__ import annotations

from fuzz_profile import LONG_PROFILE, register_profiles
from hypothesis import settings


def pytest_configure(config) -> None:
    register_profiles()
    if config.getoption("--fuzz-long", default=False):
        settings.load_profile(LONG_PROFILE)
