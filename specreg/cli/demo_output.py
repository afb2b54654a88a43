"""`specreg demo`'s files: the acceptance plots (`--plot`) and the Prometheus metrics
(`--metrics`). The text table is `specreg.cli.demo_text`'s."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

#: a `specreg.cli.demo.DemoRow` (not imported: the demo imports this module)
DemoRow = Any


def row_title(row: DemoRow) -> str:
    """A row's full name: algorithm, case and cache ('eagle, tree k4, no KV cache')."""
    cache = "no KV cache" if row.cache == "-" else f"{row.cache} cache"
    return f"{row.algorithm}, {row.case}, {cache}"


def save_plot(rows: Sequence[DemoRow], path: str) -> None:
    """Histograms of the tokens each verify step emitted, one per row, at `path`; the
    acceptance by draft position beside it (`save_position_plot`)."""
    import matplotlib  # present: `specreg demo` checks --plot before the run (SR144)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    shown = [r for r in rows if r.accept_lengths]
    cols = min(4, max(len(shown), 1))
    nrows = (len(shown) + cols - 1) // cols or 1
    fig, axes = plt.subplots(nrows, cols, figsize=(3.6 * cols, 2.9 * nrows + 0.4),
                             squeeze=False, layout="constrained")
    for ax, r in zip(axes.flat, shown, strict=False):
        top = max(r.accept_lengths)
        ax.hist(r.accept_lengths, bins=range(1, top + 2), align="left", rwidth=0.8)
        ax.set_title(row_title(r), fontsize=8)
        ax.set_xticks(range(1, top + 1))
        ax.set_xlabel("tokens emitted per verify step", fontsize=7)
        ax.set_ylabel("verify steps", fontsize=7)
        ax.tick_params(labelsize=7)
    for ax in list(axes.flat)[len(shown):]:
        ax.axis("off")
    fig.suptitle("Tokens emitted per verify step, one histogram per demo row", fontsize=10)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    save_position_plot(rows, _beside(path, "positions"))


def _beside(path: str, suffix: str) -> str:
    stem, dot, ext = path.rpartition(".")
    return f"{stem}-{suffix}.{ext}" if dot else f"{path}-{suffix}"


def save_position_plot(rows: Sequence[DemoRow], path: str) -> None:
    """Acceptance rate by draft position, one curve per row (the --plot file's `-positions`
    twin); rows of one algorithm and case whose curves are equal (the same run through each
    KV cache) share one curve, named without the cache."""
    import matplotlib.pyplot as plt
    from matplotlib.ticker import MaxNLocator

    curves: dict[tuple[str, str, tuple[float, ...]], list[DemoRow]] = {}
    for r in rows:
        if r.acceptance is not None and r.acceptance.position_drafts:
            key = (r.algorithm, r.case, r.acceptance.position_rates)
            curves.setdefault(key, []).append(r)
    fig, ax = plt.subplots(figsize=(9.6, 4.8), layout="constrained")
    for (algorithm, case, rates), same in curves.items():
        label = row_title(same[0]) if len(same) == 1 else f"{algorithm}, {case}, every cache"
        ax.plot(range(1, len(rates) + 1), rates, marker="o", label=label)
    ax.xaxis.set_major_locator(MaxNLocator(integer=True))
    ax.set_title("Acceptance by draft position, one curve per demo row")
    ax.set_xlabel("draft position (1 = the first draft after the last committed token)")
    ax.set_ylabel("drafts accepted / proposed")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=6, ncol=1 + len(curves) // 20, loc="center left",
              bbox_to_anchor=(1.01, 0.5))
    fig.savefig(path, dpi=110)
    plt.close(fig)


def save_metrics(rows: Sequence[DemoRow], path: str) -> None:
    """Every row's acceptance in Prometheus' text format (labels algorithm, case, cache)."""
    from specreg.step.acceptance_export import prometheus_text

    sources = [({"algorithm": r.algorithm, "case": r.case, "cache": r.cache}, r.acceptance)
               for r in rows if r.acceptance is not None]
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(prometheus_text(sources))
