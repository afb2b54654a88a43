"""Shadow mode never changes what SGLang computes: on every parity-grid case, SGLang with
SPECREG_SGLANG=shadow resolves (or refuses) exactly as SGLang alone, widths and messages included;
the cases specreg refuses, and among them those SGLang resolves, are counted so that the test
cannot pass on a grid without them. (That each refusal is logged once with SR166 is
test_sglang_adapter's.)"""

from __future__ import annotations

from specreg.adapters.common import outcome
from specreg.registry.registry import Registry
from tests.adapters import parity


def test_shadow_mode_computes_what_sglang_alone_computes_on_every_grid_case(parity_runs,
                                                                           parity_models):
    cases = parity.cases_of("sglang")
    alone, shadow = parity_runs["sglang"]["results"], parity_runs["sglang-shadow"]["results"]
    assert len(alone) == len(shadow) == len(cases)
    registry = Registry.load()
    refused = rescued = 0
    for case, by_sglang, in_shadow in zip(cases, alone, shadow, strict=True):
        assert in_shadow == by_sglang, (case["id"], by_sglang, in_shadow)
        if outcome(registry, parity.sglang_flags(case["facts"], parity_models))["error"]:
            refused += 1
            rescued += by_sglang["error"] is None
    # the cases that crashed SGLang in shadow mode before: specreg refuses, SGLang resolves
    assert refused >= 500 and rescued >= 300, (refused, rescued)
    print(f"shadow grid: {len(cases)} cases, {refused} specreg refuses, {rescued} of them SGLang "
          "resolves; every value, width and error unchanged")
