"""The drafter checks of the conformance kit (specreg/testing/drafter_checks.py): failures are
coded sentences naming the hook and the fix, and a plugin with no drafting code does not look
validated (demo row and kit report)."""

from __future__ import annotations

import pytest
import torch

from specreg import AlgorithmSpec, ParamRange, Registry, hookimpl
from specreg.cli.demo import run_demo
from specreg.cli.demo_text import format_table
from specreg.testing import ConformanceError, ConformanceNotice, check_algorithm
from tests.support.plugins import SpecPlugin


class _Drafter:
    def __init__(self, gamma: int, make) -> None:
        self.gamma, self.make = gamma, make

    def propose(self, history: torch.Tensor, lengths: torch.Tensor) -> torch.Tensor:
        return self.make(history.shape[0], self.gamma)


def drafting_plugin(name: str, make):
    class Plugin(SpecPlugin):
        algorithms = (name,)

        @hookimpl
        def specreg_make_drafter(self, algorithm, resolution):
            if algorithm.name != name:
                return None
            return _Drafter(resolution.gamma, make)

    registry = Registry()
    assert registry.register_plugin(Plugin(), name) == name
    return registry


@pytest.mark.parametrize(
    "name, make, code, sentence, fix",
    [
        (
            "wide",
            lambda b, gamma: torch.zeros(b, gamma + 1, dtype=torch.long),
            "SR147",
            "of shape [3, 3]; the plan's gamma is 2, so it must be [batch, gamma] = [3, 2]",
            "Fix: return plan.gamma draft tokens per request from propose",
        ),
        (
            "oov",
            lambda b, gamma: torch.full((b, gamma), 10**6, dtype=torch.long),
            "SR148",
            "token id 1000000, outside the vocabulary [0, 96)",
            "Fix: propose only real token ids",
        ),
    ],
)
def test_bad_drafter_proposals_are_coded_sentences(name, make, code, sentence, fix):
    """Wrong shape: was "(torch.Size([3, 4]), 3)"; out of vocabulary: was torch's "Class
    values must be smaller than num_classes"."""
    with pytest.raises(ConformanceError) as info:
        check_algorithm(drafting_plugin(name, make), name, samples=200)
    failure = next(f for f in info.value.failures if f"[{code}]" in f)
    assert "torch.Size" not in failure and "Class values" not in failure
    assert (
        f"the drafter of {name!r} (from specreg_make_drafter) returned from "
        "propose(history, lengths)"
    ) in failure
    assert sentence in failure and fix in failure


def test_resolve_config_that_overwrites_user_topk_is_named():
    class Overwriter(SpecPlugin):
        algorithms = (AlgorithmSpec(name="flat", drafting="chain", verify_rules=("greedy",),
                                    topk=ParamRange(1, 1, 1), num_draft_tokens=ParamRange(2, 6, 3)),)

        @hookimpl
        def specreg_resolve_config(self, config, algorithm):
            if algorithm.name != "flat":
                return None
            unset = {k: v for k, v in (("num_steps", 2), ("num_draft_tokens", 3))
                     if getattr(config, k) is None}
            return config.evolve(topk=1, **unset)  # the bug: topk overwritten even when given

    registry = Registry()
    registry.register_plugin(Overwriter(), "flat")
    with pytest.raises(ConformanceError) as info:
        check_algorithm(registry, "flat", lossless=False)
    failure = next(f for f in info.value.failures if "SR149" in f)
    assert "problems: []" not in failure
    assert "specreg_resolve_config of 'flat' changed topk from 0 (given by the user" in failure
    assert "Fix: in specreg_resolve_config set topk only when config.topk is None" in failure


def _drafterless_registry() -> Registry:
    registry = Registry.load(allowlist={"eagle"}, fresh=True)
    # registers an algorithm and nothing else: no drafter, no verifier
    registry.register_plugin(SpecPlugin("hollow"), "hollow")
    return registry


def test_kit_report_says_a_drafterless_plugin_was_not_drafting():
    with pytest.warns(ConformanceNotice, match=r"\[SR151\]"):
        report = check_algorithm(_drafterless_registry(), "hollow", samples=500)
    assert not report.failures
    assert any("specreg's toy draft model drafted" in n for n in report.notices)
    assert any("Fix: implement specreg_make_drafter" in n for n in report.notices)


def test_demo_row_says_the_toy_model_drafted():
    rows = run_demo(algorithms=["hollow", "eagle"], kv_cache="none", steps=8,
                    registry=_drafterless_registry())
    hollow = next(r for r in rows if r.algorithm == "hollow")
    eagle = next(r for r in rows if r.algorithm == "eagle")
    assert hollow.drafter == "toy model" and "[SR151]" in (hollow.notice or "")
    assert eagle.notice is None  # eagle's own verifier ran; its draft model is the framework's
    table = format_table(rows)
    assert "notice: [SR151] algorithm 'hollow' has no drafter" in table
    assert hollow.to_dict()["notice"] == hollow.notice
