"""Acceptance statistics in Prometheus' text format, through `prometheus_client` (the `metrics` extra).

`AcceptanceCollector(stats)` is a `prometheus_client` collector: register it with a registry
(`prometheus_client.REGISTRY` for a server's /metrics) and every scrape reads a fresh
`AcceptanceStats.snapshot()`; nothing is computed between scrapes. Several sources (one per
model, say) go into one collector as `[(labels, stats), ...]`, all with the same label names, so
each metric family is written once. `prometheus_text(...)` renders one scrape without a registry
of the caller's. The metric names are `METRICS`; a source's labels (`{"algorithm": "eagle"}`) are
attached to its samples. A source may also be a fixed `AcceptanceSnapshot`.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from specreg.step.acceptance_stats import AcceptanceSnapshot, AcceptanceStats

Source = AcceptanceStats | AcceptanceSnapshot

#: name -> (type, help). Counters get Prometheus' `_total` suffix in the text format.
METRICS: dict[str, tuple[str, str]] = {
    "specreg_spec_verify_steps": ("counter", "Verify calls recorded."),
    "specreg_spec_request_steps": ("counter", "Request rows verified (one per request per step)."),
    "specreg_spec_draft_tokens": ("counter", "Draft tokens proposed for verification."),
    "specreg_spec_accepted_tokens": ("counter", "Draft tokens accepted."),
    "specreg_spec_emitted_tokens": ("counter", "Tokens emitted: accepted drafts plus one per request step."),
    "specreg_spec_position_draft_tokens": ("counter", "Draft tokens proposed at each draft position."),
    "specreg_spec_position_accepted_tokens": ("counter", "Draft tokens accepted at each draft position."),
    "specreg_spec_acceptance_rate": ("gauge", "Accepted / proposed draft tokens, over all positions."),
    "specreg_spec_position_acceptance_rate": ("gauge", "Accepted / proposed draft tokens at each position."),
    "specreg_spec_mean_accepted_length": ("gauge", "Tokens emitted per request step."),
}


class AcceptanceCollector:
    """A `prometheus_client` collector over one `AcceptanceStats` or several labelled ones."""

    def __init__(
        self, stats: Source | Sequence[tuple[Mapping[str, str], Source]],
        labels: Mapping[str, str] | None = None,
    ) -> None:
        if isinstance(stats, (AcceptanceStats, AcceptanceSnapshot)):
            stats = [(labels or {}, stats)]
        self.sources = [(dict(lab), src) for lab, src in stats]
        keys = {tuple(lab) for lab, _ in self.sources}
        if len(keys) > 1:
            raise ValueError(f"every source needs the same label names, got {sorted(keys)}")
        self.label_names = list(next(iter(keys), ()))

    def describe(self) -> list[Any]:
        return []  # no values at registration time (collect() reads the stats per scrape)

    def collect(self) -> Iterator[Any]:
        require_prometheus()
        from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily

        kinds = {"counter": CounterMetricFamily, "gauge": GaugeMetricFamily}
        families = {
            name: kinds[kind](name, text, labels=[*self.label_names, *(
                ("position",) if "position" in name else ())])
            for name, (kind, text) in METRICS.items()
        }
        for labels, source in self.sources:
            snap = source.snapshot() if isinstance(source, AcceptanceStats) else source
            values = [labels[k] for k in self.label_names]
            totals = {
                "specreg_spec_verify_steps": snap.verify_steps,
                "specreg_spec_request_steps": snap.request_steps,
                "specreg_spec_draft_tokens": snap.draft_tokens,
                "specreg_spec_accepted_tokens": snap.accepted_tokens,
                "specreg_spec_emitted_tokens": snap.emitted_tokens,
                "specreg_spec_acceptance_rate": snap.acceptance_rate,
                "specreg_spec_mean_accepted_length": snap.mean_accepted_length,
            }
            for name, value in totals.items():
                families[name].add_metric(values, value)
            per_position = {
                "specreg_spec_position_draft_tokens": snap.position_drafts,
                "specreg_spec_position_accepted_tokens": snap.position_accepted,
                "specreg_spec_position_acceptance_rate": snap.position_rates,
            }
            for name, series in per_position.items():
                for position, value in enumerate(series):
                    families[name].add_metric([*values, str(position)], value)
        yield from families.values()


def require_prometheus() -> None:
    """SR131 unless prometheus_client is installed (the `metrics` extra)."""
    import importlib.util

    from specreg.errors import SpecRegError, problem

    if importlib.util.find_spec("prometheus_client") is None:
        raise SpecRegError(problem(
            "SR131", "exporting acceptance statistics needs prometheus_client, which is not "
            "installed", accepted="specreg installed with the metrics extra",
            fix="pip install 'specreg[metrics]', or read AcceptanceStats.snapshot().to_dict()",
        ))


def prometheus_text(
    stats: Source | Sequence[tuple[Mapping[str, str], Source]],
    labels: Mapping[str, str] | None = None,
) -> str:
    """One scrape of `stats` (as `AcceptanceCollector` takes it) in Prometheus' text format."""
    require_prometheus()
    from prometheus_client import CollectorRegistry, generate_latest

    registry = CollectorRegistry(auto_describe=False)
    registry.register(AcceptanceCollector(stats, labels))  # type: ignore[arg-type]
    return generate_latest(registry).decode()
