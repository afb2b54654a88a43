"""`specreg demo`'s output: the table, the acceptance plots (`--plot`) and the Prometheus
metrics (`--metrics`)."""

from __future__ import annotations

from typing import Any

from specreg.testing.lossless import P_VALUE_THRESHOLD

#: a `specreg.demo.DemoRow` (not imported: the demo imports this module)
DemoRow = Any
#: The labels of the demo's per-request-parameters and grammar rows.
MIXED_PARAMS_LABEL = "mixed params"
CONSTRAINED_LABEL = "json schema"


def format_table(rows: list[DemoRow]) -> str:
    head = (
        f"{'algorithm':<10} {'case':<12} {'cache':<9} {'accept len':>10} {'tok/fwd':>8} "
        f"{'lossless':>9} {'hit rate':>8} {'bytes copied':>12} {'backend':>8} "
        f"{'drafter':>9}  config"
    )
    lines = [head, "-" * len(head)]
    for r in rows:
        verdict = "ERROR" if r.error else ("pass" if r.lossless else "FAIL")
        hit = f"{r.hit_rate:.1%}" if r.hit_rate is not None else "-"
        copied = f"{int(r.bytes_copied):,}" if r.bytes_copied is not None else "-"
        cfg = ", ".join(f"{k}={v}" for k, v in r.config.items() if k not in ("algorithm", "cache"))
        lines.append(
            f"{r.algorithm:<10} {r.case:<12} {r.cache:<9} {r.mean_accepted_length:>10.2f} "
            f"{r.tokens_per_target_forward:>8.2f} {verdict:>9} {hit:>8} {copied:>12} "
            f"{r.backend:>8} {r.drafter:>9}  {cfg}"
        )
        if r.acceptance is not None and r.acceptance.position_drafts:
            rates = " ".join(f"{x:.2f}" for x in r.acceptance.position_rates)
            lines.append(f"    acceptance by draft position: {rates} (all positions "
                         f"{r.acceptance.acceptance_rate:.2f}; {r.acceptance.accepted_tokens}/"
                         f"{r.acceptance.draft_tokens} drafts accepted)")
        if r.notice:
            lines.append(f"    notice: {r.notice}")
        if r.invariant_equal is not None:
            standard = r.standard_acceptance or 0.0
            lines.append(
                f"    invariant mode: tokens equal plain sampling: "
                f"{'yes' if r.invariant_equal else 'NO'}; accepted per draft "
                f"{r.invariant_acceptance or 0:.2f} (standard rule {standard:.2f}; bound "
                f"(1-d)/(1+d) = {standard / (2 - standard):.2f} with 1-d the standard rate)"
            )
        elif r.invariant_note:
            lines.append(f"    invariant mode: not run ({r.invariant_note})")
        if r.case == MIXED_PARAMS_LABEL and r.sampling_checks:
            kinds = "; ".join(
                f"{k} {_p_text(p)}" for k, p in zip(r.sampling_checks, r.sampling_p_values, strict=True)
            )
            lines.append(f"    greedy requests {'equal' if r.greedy_lossless else 'DIFFER from'} "
                         f"plain greedy; sampled requests by the {r.verify_rule} rule, first "
                         f"tokens (chi-square): {kinds}")
        if r.case == CONSTRAINED_LABEL and r.sampling_checks:
            lines.append(f"    grammar (xgrammar, JSON schema): {r.grammar_violations} emitted tokens "
                         f"refused; greedy {'equals' if r.greedy_lossless else 'DIFFERS from'} plain "
                         f"constrained greedy; sampled pairs (chi-square) {_p_text(r.sampling_p_values[0])}")
        if r.error:
            lines.append(f"    error: {r.error}")
    return "\n".join(lines)


def _p_text(p: float) -> str:
    """A p-value beside the threshold it is held to: 'p=0.014 > 0.001' passes."""
    return f"p={p:.3f} {'>' if p > P_VALUE_THRESHOLD else '<='} {P_VALUE_THRESHOLD:g}"




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
