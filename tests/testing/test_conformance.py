"""The built-in plugins pass the conformance kit that third-party plugins run."""

import pytest

from specreg import Registry, hookimpl
from specreg.cli.demo import toy_draft_checkpoint
from specreg.testing import ConformanceError, ToyConfig, ToyLM, check_algorithm, check_cache
from specreg.testing.kv import toy_cache_options
from tests.support.plugins import SpecPlugin

TOY = ToyConfig()


@pytest.fixture(scope="module")
def registry():
    return Registry.load(
        allowlist={"eagle", "dspark", "hisparse", "draft_model", "medusa"}, fresh=True
    )


@pytest.mark.parametrize(
    "name, base",
    [
        ("eagle", {}),
        ("eagle3", {}),
        ("dspark", {"draft_config": toy_draft_checkpoint(TOY)}),
        ("dflash", {"draft_config": toy_draft_checkpoint(TOY)}),
        ("draft_model", {"draft_config": {"vocab_size": TOY.vocab_size}}),
        ("medusa", {}),
    ],
)
def test_builtin_algorithms_conform(registry, name, base):
    report = check_algorithm(registry, name, base_config=base, samples=2000)
    assert len(report.checked) > 10 and not report.failures
    # the per-step protocols were checked, and the verify ran at every candidate width
    assert any("plan.verifier satisfies" in c for c in report.checked)
    assert any("plan.drafter satisfies" in c for c in report.checked)
    assert any(c.startswith("greedy output at candidate step") for c in report.checked)
    summary = report.summary()  # one line: every family checked, each held in full
    assert summary == str(report).splitlines()[0] and " passes: " in summary
    for family in ("configs", "widths", "protocols", "ranges", "candidates", "lossless"):
        held = next(part for part in summary.split("(")[1].split(", ") if part.startswith(family))
        done, total = held.split()[1].rstrip(")").split("/")
        assert done == total and int(total) > 0, summary


@pytest.mark.parametrize(
    "algorithm",
    [
        {"algorithm": "eagle", "num_steps": 3, "topk": 1},
        {"algorithm": "dspark", "draft_config": toy_draft_checkpoint(TOY)},
    ],
)
def test_hisparse_conforms_with_eagle_and_dspark(registry, algorithm):
    options = toy_cache_options(8, 128, ToyLM(TOY))
    report = check_cache(registry, "hisparse", algorithm_config={**algorithm, "cache_options": options})
    assert "nothing lost over random swap calls" in report.checked


def test_kit_catches_a_plugin_whose_widths_lie():
    """A broken plugin fails the kit: its draft_decode width is 0 and its ranges are unchecked."""

    class Liar(SpecPlugin):
        algorithms = ("liar",)

        @hookimpl
        def specreg_num_tokens_per_req(self, algorithm, phase):
            return 0 if algorithm.name == "liar" and phase == "draft_decode" else None

    registry = Registry()
    registry.register_plugin(Liar(), "liar")
    with pytest.raises(ConformanceError) as info:
        check_algorithm(registry, "liar", lossless=False)
    assert any("draft_decode" in f for f in info.value.failures)


def test_kit_catches_a_lossy_verifier():
    class Lossy(SpecPlugin):
        """Accepts every draft: fast, and wrong."""

        algorithms = ("lossy",)

        @hookimpl
        def specreg_make_verifier(self, config, algorithm, resolution):
            if algorithm.name != "lossy":
                return None
            import torch

            from specreg.contract.protocols import VerifyResult

            class AcceptAll:
                """Meets the protocol's shape, and accepts everything."""

                rules = ("greedy",)  # sized as the plan asks: only its verdicts are wrong
                num_draft_tokens = max(c.num_draft_tokens for c in resolution.configs())
                widths = tuple(sorted({c.num_draft_tokens for c in resolution.configs()}))

                def verify_greedy(self, candidates, target_logits, **kwargs):
                    b, n = candidates.shape
                    bonus = target_logits[:, -1].argmax(-1)
                    out = torch.cat([candidates[:, 1:], bonus[:, None]], 1)
                    return VerifyResult(num_accepted=torch.full((b,), n - 1, dtype=torch.int32),
                                        bonus=bonus, output_tokens=out, width=n)

                def verify_sampling(self, candidates, target_probs, draft_probs, **kwargs):
                    return self.verify_greedy(candidates, target_probs)

            return AcceptAll()

    registry = Registry()
    registry.register_plugin(Lossy(), "lossy")
    with pytest.raises(ConformanceError) as info:
        check_algorithm(registry, "lossy")
    assert any("greedy output equals plain greedy" in f for f in info.value.failures)


def test_every_kit_failure_is_a_coded_sentence_and_the_error_names_the_clauses():
    class Liar(SpecPlugin):
        algorithms = ("liar",)

        @hookimpl
        def specreg_num_tokens_per_req(self, algorithm, phase):
            return 0 if algorithm.name == "liar" and phase == "draft_decode" else None

    registry = Registry()
    registry.register_plugin(Liar(), "liar")
    with pytest.raises(ConformanceError) as info:
        check_algorithm(registry, "liar", lossless=False)
    report = info.value.report
    assert report.failed and all(c.problem is not None and c.problem.fix for c in report.failed)
    assert {c.problem.code for c in report.failed} == {"SR125"}  # no bare AssertionError text
    lines = str(info.value).splitlines()
    assert lines[0] == report.summary() and "fails 7 clause(s)" in lines[0]
    assert "configs 0/7" in lines[0] and "ranges 4/4" in lines[0]
    assert all(line.startswith("  - [configs] ") and "[SR125]" in line for line in lines[1:])
    assert info.value.clauses[0] == "has valid configs in its declared ranges"
    assert info.value.clauses[1] == "no plugin fault for {'algorithm': 'liar', 'num_steps': 1}"


def test_the_gamma_clause_is_gamma_below_the_verify_width():
    """Was coded as gamma < width + 1: a plan with gamma equal to its verify width passed."""
    from types import SimpleNamespace

    from specreg.testing.conformance import _width_clauses
    from specreg.testing.conformance_report import ConformanceReport

    for gamma, held in ((3, True), (4, False), (0, False)):
        plan = SimpleNamespace(gamma=gamma, algorithm=SimpleNamespace(name="toy"),
                               num_tokens_per_req=lambda phase, is_draft_worker=False: 4)
        report = ConformanceReport("algorithm 'toy'")
        _width_clauses(report, plan, {"algorithm": "toy"})
        (clause,) = [c for c in report.clauses if "gamma" in c.name]
        assert clause.name.startswith("0 < gamma < target_verify width")
        assert clause.passed is held and (held or clause.problem.code == "SR125")
