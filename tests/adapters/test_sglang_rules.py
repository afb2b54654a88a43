"""Inside SGLang the adapter asks SGLang's own functions for its defaults and the HiSparse target
rule (specreg.adapters.sglang_rules); the CLI keeps specreg's standalone copy. Both answer alike
on every parity-grid case."""

from __future__ import annotations

from pathlib import Path

from tests.adapters.conftest import run_in_env
from tests.adapters.test_sglang_parity import grid  # the parity grid's own cases, as it widens

HERE = Path(__file__).parent


def rule_key(case: dict) -> tuple[str, str]:
    """What both rules read: SGLang's auto params read the algorithm and the target's
    architecture, its HiSparse target test the target's config; nothing else of a case."""
    return case["flags"]["speculative_algorithm"], case["flags"]["model_path"]


def test_sglangs_rules_and_the_standalone_copy_agree_on_every_grid_case(framework_env, model_dirs):
    cases = grid(model_dirs)
    keys = sorted({rule_key(case) for case in cases})
    probes = [{"key": list(key), "kwargs": {"model_path": key[1], "device": "cuda",
                                           "speculative_algorithm": key[0]}} for key in keys]
    answers = {tuple(r["key"]): r for r in run_in_env(framework_env, str(HERE / "sglang_rules_probe.py"), probes)}
    assert set(answers) == set(keys)
    for case in cases:  # every case, through the pair its answers depend on
        answer = answers[rule_key(case)]
        assert answer["sglang"] == answer["standalone"], (case["flags"], answer)
    targets = {answer["sglang"]["hisparse_target"] for answer in answers.values()}
    defaults = {tuple(answer["sglang"]["defaults"]) for answer in answers.values()}
    assert targets == {True, False} and defaults == {(5, 4, 8), (3, 1, 4)}  # both branches asked
    print(f"rules: {len(cases)} grid cases, {len(keys)} (algorithm, target) pairs asked of SGLang")
