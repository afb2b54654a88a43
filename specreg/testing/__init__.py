"""Tools for testing speculative decoding end to end: toy models, a reference loop driven only by
a `SpecPlan`, lossless checks, and the conformance kit for plugin authors.

Imports torch (unlike `import specreg`).
"""

from specreg.testing.conformance import check_algorithm
from specreg.testing.conformance_cache import check_cache
from specreg.testing.conformance_report import (
    Clause,
    ConformanceError,
    ConformanceNotice,
    ConformanceReport,
)
from specreg.testing.loop import GenerationResult, SpeculativeLoop, run_generation
from specreg.testing.lossless import check_greedy, check_sampling, chi_square_p_value
from specreg.testing.toy_model import ToyConfig, ToyLM, greedy_reference

__all__ = [
    "Clause",
    "ConformanceError",
    "ConformanceNotice",
    "ConformanceReport",
    "GenerationResult",
    "SpeculativeLoop",
    "ToyConfig",
    "ToyLM",
    "check_algorithm",
    "check_cache",
    "check_greedy",
    "check_sampling",
    "chi_square_p_value",
    "greedy_reference",
    "run_generation",
]
