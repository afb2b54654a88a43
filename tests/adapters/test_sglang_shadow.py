"""Shadow mode never changes what SGLang computes: on every parity-grid case specreg refuses,
SGLang with SPECREG_SGLANG=shadow resolves (or refuses) exactly as SGLang alone, widths included,
and each refusal SGLang accepted is logged once with SR166."""

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


def test_a_case_specreg_refuses_and_sglang_resolves_is_logged_once(framework_env, refused, runs):
    index = next(i for i, alone in enumerate(runs["alone"]) if alone["error"] is None)
    case = refused[index]
    out = run_in_env(framework_env, str(HERE / "sglang_load.py"), [case["kwargs"]] * 2,
                     SPECREG_SGLANG="shadow")
    first, again = out["results"]
    assert first == again and first["error"] is None
    assert first["values"] == [runs["alone"][index]["values"][k] for k in (
        "speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")]
    rejections = [line for line in out["adapter_log"] if "SR166" in line and "specreg reports" in line]
    assert len(rejections) == 1 and all(code in rejections[0] for code in case["codes"]), rejections
