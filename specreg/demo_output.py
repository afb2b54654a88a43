"""`specreg demo`'s files: the acceptance plots (`--plot`) and the Prometheus metrics (`--metrics`)."""

from __future__ import annotations

from typing import Any

#: a `specreg.demo.DemoRow` (not imported: the demo imports this module)
DemoRow = Any


def save_plot(rows: list[DemoRow], path: str) -> None:
    import matplotlib  # present: `specreg demo` checks --plot before the run (SR144)

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    shown = [r for r in rows if r.accept_lengths]
    cols = min(4, max(len(shown), 1))
    nrows = (len(shown) + cols - 1) // cols or 1
    fig, axes = plt.subplots(nrows, cols, figsize=(3.2 * cols, 2.6 * nrows), squeeze=False)
    for ax, r in zip(axes.flat, shown, strict=False):
        top = max(r.accept_lengths)
        ax.hist(r.accept_lengths, bins=range(1, top + 2), align="left", rwidth=0.8)
        ax.set_title(f"{r.algorithm} {r.case} {r.cache}", fontsize=8)
        ax.set_xlabel("tokens per verify", fontsize=7)
    spare = list(axes.flat)[len(shown):]
    for ax in spare:
        ax.axis("off")
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    save_position_plot(rows, _beside(path, "positions"))


def _beside(path: str, suffix: str) -> str:
    stem, dot, ext = path.rpartition(".")
    return f"{stem}-{suffix}.{ext}" if dot else f"{path}-{suffix}"


def save_position_plot(rows: list[DemoRow], path: str) -> None:
    """Acceptance rate by draft position, one curve per row (the --plot file's `-positions` twin)."""
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=(6.4, 4.0))
    for r in rows:
        if r.acceptance is None or not r.acceptance.position_drafts:
            continue
        rates = r.acceptance.position_rates
        ax.plot(range(1, len(rates) + 1), rates, marker="o", label=f"{r.algorithm} {r.case} {r.cache}")
    ax.set_xlabel("draft position")
    ax.set_ylabel("accepted / proposed")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=6, ncol=2)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def save_metrics(rows: list[DemoRow], path: str) -> None:
    """Every row's acceptance in Prometheus' text format (labels algorithm, case, cache)."""
    from specreg.acceptance_metrics import prometheus_text

    sources = [({"algorithm": r.algorithm, "case": r.case, "cache": r.cache}, r.acceptance)
               for r in rows if r.acceptance is not None]
    with open(path, "w", encoding="utf-8") as handle:
        handle.write(prometheus_text(sources))
