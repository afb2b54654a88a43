"""Acceptance statistics: counts per position against a per-row count, the export, the demo."""

from __future__ import annotations

import importlib.util

import pytest
import torch

from specreg.step.acceptance_stats import AcceptanceStats
from specreg.errors import KernelInputError, SpecRegError
from specreg.contract.protocols import VerifyResult


def _result(accepted, slots, param_error=None):
    b = len(accepted)
    return VerifyResult(
        num_accepted=torch.tensor(accepted, dtype=torch.int32),
        output_tokens=torch.zeros(b, slots, dtype=torch.long), bonus=torch.zeros(b, dtype=torch.long),
        width=slots, param_error=None if param_error is None else torch.tensor(param_error),
    )


def _count(steps):
    """Per-row reference: steps = [(accepted list, drafts list, counted list)]."""
    positions = max(max(d) for _, d, _ in steps)
    drafts_at, accepted_at = [0] * positions, [0] * positions
    totals = [0, 0, 0]
    for accepted, drafts, counted in steps:
        for a, d, c in zip(accepted, drafts, counted, strict=True):
            if not c:
                continue
            totals[0] += 1
            totals[1] += d
            totals[2] += a
            for i in range(d):
                drafts_at[i] += 1
                accepted_at[i] += i < a
    return drafts_at, accepted_at, totals


def test_random_steps_equal_the_per_row_count():
    g = torch.Generator().manual_seed(7)
    stats, steps = AcceptanceStats(), []
    for _ in range(200):
        b = int(torch.randint(1, 9, (1,), generator=g))
        slots = int(torch.randint(2, 9, (1,), generator=g))
        drafts = torch.randint(0, slots, (b,), generator=g)
        accepted = (torch.rand(b, generator=g) * (drafts + 1)).long().clamp(max=drafts)
        counted = torch.rand(b, generator=g) > 0.2
        stats.record_counts(accepted, drafts, counted=counted, max_drafts=slots - 1)
        steps.append((accepted.tolist(), drafts.tolist(), counted.tolist()))
    snap = stats.snapshot()
    drafts_at, accepted_at, (request_steps, draft_tokens, accepted_tokens) = _count(steps)
    n = len(drafts_at)
    assert snap.position_drafts[:n] == tuple(drafts_at)
    assert snap.position_accepted[:n] == tuple(accepted_at)
    assert set(snap.position_drafts[n:]) <= {0}
    assert (snap.request_steps, snap.draft_tokens, snap.accepted_tokens) == (
        request_steps, draft_tokens, accepted_tokens)
    assert snap.emitted_tokens == accepted_tokens + request_steps
    assert snap.verify_steps == 200
    assert snap.position_rates[0] == pytest.approx(accepted_at[0] / drafts_at[0])


def test_results_default_to_full_width_and_skip_param_errors():
    stats = AcceptanceStats()
    stats.record(_result([0, 2, 3], 4), request_ids=["a", "b", "c"])
    stats.record(_result([1, 0], 4, param_error=[False, True]), request_ids=["a", "d"])
    snap = stats.snapshot()
    assert snap.position_drafts == (4, 4, 4)
    assert snap.position_accepted == (3, 2, 1)
    assert snap.mean_accepted_length == pytest.approx((0 + 2 + 3 + 1 + 4) / 4)
    assert snap.per_request == {"a": (2, 6, 1), "b": (1, 3, 2), "c": (1, 3, 3)}
    assert snap.conditional_rates == pytest.approx((3 / 4, 2 / 3, 1 / 2))


def test_result_reports_acceptance_by_position():
    result = _result([0, 2, 3], 4)
    assert result.accepted_by_position.tolist() == [
        [False, False, False], [True, True, False], [True, True, True]]
    stats = AcceptanceStats()
    stats.record(result)
    assert stats.snapshot().position_accepted == tuple(result.accepted_by_position.sum(0).tolist())


def test_histograms_grow_with_wider_results():
    stats = AcceptanceStats()
    stats.record(_result([1], 3))
    stats.record(_result([5], 7))
    assert stats.snapshot().position_drafts == (2, 2, 1, 1, 1, 1)
    assert stats.snapshot().position_accepted == (2, 1, 1, 1, 1, 0)
    stats.reset()
    assert stats.snapshot().request_steps == 0


@pytest.mark.parametrize(
    ("kwargs", "count"),
    [
        ({"num_drafts": torch.tensor([3])}, 1),  # wrong length
        ({"num_drafts": torch.tensor([3, -1])}, 2),  # negative, and below row 1's 2 accepted
        ({"num_drafts": torch.tensor([3, 1])}, 1),  # row 1 accepted 2 of 1
        ({"num_drafts": torch.tensor([3, 9])}, 1),  # beyond the 3 slots
        ({"request_ids": ["only-one"]}, 1),
    ],
)
def test_bad_counts_are_sr132_all_at_once(kwargs, count):
    with pytest.raises(KernelInputError) as info:
        AcceptanceStats().record(_result([1, 2], 4), **kwargs)
    assert info.value.codes == ("SR132",) * count
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("topk", [1, 2])
def test_reference_loop_reports_acceptance(topk):
    from specreg.registry.registry import Registry
    from specreg.testing.loop import SpeculativeLoop
    from specreg.testing.toy_model import ToyConfig, ToyLM

    plan = Registry.load().resolve({"algorithm": "eagle", "num_steps": 3, "topk": topk,
                                    "num_draft_tokens": 4 * topk})
    target = ToyLM(ToyConfig(vocab_size=64), seed=1)
    draft = target.perturbed(0.3, seed=2)
    prompts = torch.randint(0, 63, (3, 5), generator=torch.Generator().manual_seed(0))
    result = SpeculativeLoop(plan, target, draft).generate(prompts, 12)
    snap = result.acceptance
    assert snap.request_steps == len(result.emitted_per_verify)
    assert snap.mean_accepted_length == pytest.approx(result.mean_accepted_length)
    assert snap.position_drafts == (snap.request_steps,) * 3
    assert list(snap.position_accepted) == sorted(snap.position_accepted, reverse=True)


needs_prometheus = pytest.mark.skipif(
    importlib.util.find_spec("prometheus_client") is None, reason="the metrics extra")


@needs_prometheus
def test_prometheus_text_parses_back_to_the_snapshot():
    from prometheus_client.parser import text_string_to_metric_families

    from specreg.step.acceptance_export import METRICS, prometheus_text

    eagle, dspark = AcceptanceStats(), AcceptanceStats()
    eagle.record(_result([0, 2, 3], 4))
    dspark.record(_result([1], 3))
    text = prometheus_text([({"algorithm": "eagle"}, eagle), ({"algorithm": "dspark"}, dspark)])
    families = {f.name: f for f in text_string_to_metric_families(text)}
    assert set(families) == set(METRICS)  # the parser drops counters' _total
    samples = {(s.name, tuple(sorted(s.labels.items()))): s.value
               for f in families.values() for s in f.samples}
    e = eagle.snapshot()
    assert samples[("specreg_spec_draft_tokens_total", (("algorithm", "eagle"),))] == e.draft_tokens
    assert samples[("specreg_spec_accepted_tokens_total", (("algorithm", "dspark"),))] == 1
    for i, rate in enumerate(e.position_rates):
        key = ("specreg_spec_position_acceptance_rate", (("algorithm", "eagle"), ("position", str(i))))
        assert samples[key] == pytest.approx(rate)
    assert samples[("specreg_spec_mean_accepted_length", (("algorithm", "eagle"),))] == pytest.approx(
        e.mean_accepted_length)


@needs_prometheus
def test_collector_reads_fresh_counts_per_scrape():
    from prometheus_client import CollectorRegistry, generate_latest

    from specreg.step.acceptance_export import AcceptanceCollector

    stats = AcceptanceStats()
    registry = CollectorRegistry(auto_describe=False)
    registry.register(AcceptanceCollector(stats))
    assert b"specreg_spec_verify_steps_total 0.0" in generate_latest(registry)
    stats.record(_result([1], 3))
    assert b"specreg_spec_verify_steps_total 1.0" in generate_latest(registry)


def test_export_without_prometheus_is_sr131(monkeypatch):
    from specreg.step import acceptance_export as acceptance_metrics

    real = importlib.util.find_spec
    monkeypatch.setattr(importlib.util, "find_spec",
                        lambda name, *a: None if name == "prometheus_client" else real(name, *a))
    with pytest.raises(SpecRegError) as info:
        acceptance_metrics.prometheus_text(AcceptanceStats())
    assert info.value.codes == ("SR131",)


@needs_prometheus
def test_docs_list_every_metric():
    from pathlib import Path

    from specreg.step.acceptance_export import METRICS

    page = (Path(__file__).parents[2] / "docs" / "reference" / "acceptance.md").read_text()
    for name, (kind, text) in METRICS.items():
        shown = f"`{name}_total" if kind == "counter" else f"`{name}"
        assert shown in page and text in page, name
