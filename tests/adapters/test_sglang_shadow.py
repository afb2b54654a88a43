"""Shadow mode never changes what SGLang computes: on every parity-grid case specreg refuses,
SGLang with SPECREG_SGLANG=shadow resolves (or refuses) exactly as SGLang alone, widths included.
(That each such refusal is logged once with SR166 is test_sglang_adapter's.)"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from specreg.adapters.common import outcome
from specreg.registry import Registry
from tests.adapters.conftest import run_in_env
from tests.adapters.test_sglang_parity import grid  # the parity grid's own cases, as it widens

HERE = Path(__file__).parent


@pytest.fixture(scope="module")
def refused(model_dirs) -> list[dict[str, Any]]:
    """Every grid case specreg refuses (with its codes), whatever SGLang does with it."""
    registry = Registry.load()
    cases = []
    for case in grid(model_dirs):
        ours = outcome(registry, dict(case["flags"]))
        if ours["error"]:
            cases.append({**case, "codes": ours["error"]})
    return cases


@pytest.fixture(scope="module")
def runs(framework_env, refused) -> dict[str, Any]:
    script = str(HERE / "sglang_grid.py")
    alone = run_in_env(framework_env, script, refused)
    shadow = run_in_env(framework_env, script, refused, args=("--load-plugins",),
                        SPECREG_SGLANG="shadow")
    return {"alone": alone["results"], "shadow": shadow["results"]}


def test_shadow_mode_computes_what_sglang_alone_computes_where_specreg_refuses(refused, runs):
    rescued = [alone for alone in runs["alone"] if alone["error"] is None]
    # the cases that crashed SGLang in shadow mode before: specreg refuses, SGLang resolves
    assert len(rescued) >= 30, len(rescued)
    for case, alone, shadow in zip(refused, runs["alone"], runs["shadow"], strict=True):
        assert shadow == alone, (case["flags"], case["codes"], alone, shadow)
    print(f"shadow grid: {len(refused)} cases specreg refuses, {len(rescued)} of them SGLang "
          "resolves; every value, width and error unchanged")
