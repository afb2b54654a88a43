"""`specreg demo`'s text output: the table of rows, the notes on algorithms whose figures
coincide, and the legend that says what every column and line means.

Columns are as wide as their longest cell, so any algorithm name keeps them aligned; config
values that are empty are left out. Rows are `specreg.cli.demo.DemoRow`s (not imported: the demo
imports this module).
"""

from __future__ import annotations

import textwrap
from collections.abc import Callable, Sequence
from typing import Any

import attrs

from specreg.testing.lossless import P_VALUE_THRESHOLD

#: a `specreg.cli.demo.DemoRow`
DemoRow = Any
#: The labels of the demo's per-request-parameters and grammar rows.
MIXED_PARAMS_LABEL = "mixed params"
CONSTRAINED_LABEL = "json schema"
WIDTH = 100  # the legend's and the notes' line width
INDENT = "    "  # the lines under a row


@attrs.frozen
class Column:
    """One column of the table: its header, how a row fills it, what it means."""

    header: str
    cell: Callable[[DemoRow], str]
    meaning: str
    right: bool = False


def _verdict(row: DemoRow) -> str:
    return "ERROR" if row.error else ("pass" if row.lossless else "FAIL")


def _config(row: DemoRow) -> str:
    shown = {k: v for k, v in row.config.items()
             if k not in ("algorithm", "cache") and v not in (None, "", [], (), {})}
    return ", ".join(f"{k}={v}" for k, v in shown.items())


COLUMNS = (
    Column("algorithm", lambda r: r.algorithm, "the algorithm's registered name"),
    Column("case", lambda r: r.case,
           "default: the algorithm's default config; tree k4: a tree of 3 steps, topk 4, 8 "
           f"draft tokens; {MIXED_PARAMS_LABEL}: a batch mixing greedy, temperature, top-k, "
           f"top-p and min-p requests; {CONSTRAINED_LABEL}: decoding under a JSON-schema grammar"),
    Column("cache", lambda r: "none" if r.cache == "-" else r.cache,
           "the KV-cache backend the verify forwards read through (none: no cache)"),
    Column("tok/verify", lambda r: f"{r.mean_accepted_length:.2f}",
           "mean tokens emitted per verify step: the accepted drafts plus the target's own "
           "token after them (SGLang's accept length)", right=True),
    Column("tok/fwd", lambda r: f"{r.tokens_per_target_forward:.2f}",
           "generated tokens per target forward", right=True),
    Column("lossless", _verdict,
           "pass: greedy output equals plain greedy decoding token for token, and sampled "
           "tokens pass a chi-square test against the target's exact distribution (p > "
           f"{P_VALUE_THRESHOLD:g}); FAIL: a check failed; ERROR: the row raised", right=True),
    Column("hits", lambda r: "-" if r.hit_rate is None else f"{r.hit_rate:.1%}",
           "the KV cache's hit rate: rows served from its device buffer (-: no cache)",
           right=True),
    Column("copied", lambda r: "-" if r.bytes_copied is None else f"{int(r.bytes_copied):,}",
           "bytes the KV cache copied from its host copy (-: no cache)", right=True),
    Column("backend", lambda r: r.backend, "the kernel backend that ran (torch on CPU, triton "
           "on CUDA)"),
    Column("drafter", lambda r: r.drafter,
           "plugin: the plan's own drafter drafted; toy model: specreg's toy draft model stood "
           "in for a plugin that has none (the row adds an SR151 notice)"),
    Column("config", _config, "the resolved config, empty values left out"),
)

#: The lines under a row: their label and what they say.
LINES = (
    ("acceptance by draft position",
     "accepted / proposed drafts at each draft position of the greedy run, then over all "
     "positions"),
    ("invariant mode",
     "default rows: sampled generation with fixed request keys under the drafter-invariant "
     "verify mode; whether its tokens equal plain keyed sampling token for token, its drafts "
     "accepted per draft, the standard rule's on the same keys, and the bound (1-d)/(1+d) "
     "on it for drafts drawn on the request's keys, 1-d being the standard rule's rate"),
    ("greedy requests",
     f"{MIXED_PARAMS_LABEL} rows: the batch's greedy requests against plain greedy decoding, "
     "the rule that verified its sampled requests (with_draft: drafts drawn from each "
     "request's filtered q; target_only: deterministic drafts), and a chi-square p-value per "
     "sampled kind"),
    ("grammar",
     f"{CONSTRAINED_LABEL} rows: emitted tokens the grammar refused, greedy against plain "
     "constrained greedy, sampled pairs against non-speculative constrained sampling; the "
     "drafts are proposed without the grammar, and a draft that leaves it is rejected"),
    ("notice / error", "what the row could not show, or why it failed (`specreg explain CODE`)"),
)

TOY_TEXT = (
    "Every row generates on a seeded toy target model whose text repeats as real text does "
    "(it favours the token that followed the current token's last occurrence), drafted where "
    "a drafter needs a model by a perturbed copy of it."
)


def format_table(rows: Sequence[DemoRow]) -> str:
    """The header, then each row with the lines under it."""
    cells = [[column.cell(r) for column in COLUMNS] for r in rows]
    widths = [max([len(c.header), *(len(line[i]) for line in cells)])
              for i, c in enumerate(COLUMNS)]

    def line(values: Sequence[str]) -> str:
        parts = [v.rjust(w) if c.right else v.ljust(w)
                 for c, v, w in zip(COLUMNS, values, widths, strict=True)]
        return "  ".join(parts).rstrip()

    head = line([c.header for c in COLUMNS])
    out = [head, "-" * len(head)]
    for r, values in zip(rows, cells, strict=True):
        out.append(line(values))
        out += [INDENT + text for text in row_lines(r)]
    return "\n".join(out)


def row_lines(r: DemoRow) -> list[str]:
    """The lines under a row (`LINES` says what each means)."""
    out = []
    if r.acceptance is not None and r.acceptance.position_drafts:
        rates = " ".join(f"{x:.2f}" for x in r.acceptance.position_rates)
        out.append(f"acceptance by draft position: {rates} (all positions "
                   f"{r.acceptance.acceptance_rate:.2f}; {r.acceptance.accepted_tokens}/"
                   f"{r.acceptance.draft_tokens} drafts accepted)")
    if r.notice:
        out.append(f"notice: {r.notice}")
    if r.invariant_equal is not None:
        standard = r.standard_acceptance or 0.0
        out.append(f"invariant mode: tokens equal plain sampling: "
                   f"{'yes' if r.invariant_equal else 'NO'}; accepted per draft "
                   f"{r.invariant_acceptance or 0:.2f} (standard rule {standard:.2f}, bound "
                   f"{standard / (2 - standard):.2f})")
    elif r.invariant_note:
        out.append(f"invariant mode: not run ({r.invariant_note})")
    if r.case == MIXED_PARAMS_LABEL and r.sampling_checks:
        kinds = "; ".join(f"{k} {_p_text(p)}"
                          for k, p in zip(r.sampling_checks, r.sampling_p_values, strict=True))
        out.append(f"greedy requests {'equal' if r.greedy_lossless else 'DIFFER from'} plain "
                   f"greedy; sampled requests by the {r.verify_rule} rule, first tokens "
                   f"(chi-square): {kinds}")
    if r.case == CONSTRAINED_LABEL and r.sampling_checks:
        out.append(f"grammar (JSON schema): {r.grammar_violations} emitted tokens refused; "
                   f"greedy {'equals' if r.greedy_lossless else 'DIFFERS from'} plain "
                   f"constrained greedy; sampled pairs (chi-square) "
                   f"{_p_text(r.sampling_p_values[0])}")
    if r.error:
        out.append(f"error: {r.error}")
    return out


def _p_text(p: float) -> str:
    """A p-value beside the threshold it is held to: 'p=0.014 > 0.001' passes."""
    return f"p={p:.3f} {'>' if p > P_VALUE_THRESHOLD else '<='} {P_VALUE_THRESHOLD:g}"


# ------------------------------------------------------------------------------------- notes
#: Why drafters coincide on the toy model, by what they draft from (`specreg.contract.protocols`' needs).
MODEL_REASON = (
    "on the toy model every drafter that reads the target's hidden states or runs a draft model "
    "gets its scores from the same toy draft model, so drafters that differ only in what a real "
    "model gives them (which target states they read, how their draft network is trained) "
    "propose the same tokens here"
)
HISTORY_REASON = "they look up the same token history and find the same continuations in it"
OTHER_REASON = "they proposed the same drafts on the toy model"
MODEL_NEEDS = frozenset({"target_hidden_states", "draft_model", None})


def coincidences(rows: Sequence[DemoRow]) -> list[tuple[tuple[str, ...], tuple[str, ...]]]:
    """(algorithms, cases) for each set of two or more algorithms whose rows of the same case
    and cache accepted the same drafts at every verify step, the sets in order of appearance."""
    groups: dict[tuple[Any, ...], list[str]] = {}
    for r in rows:
        if r.error or not r.accept_lengths or r.acceptance is None:
            continue
        key = (r.case, r.cache, tuple(r.accept_lengths), r.acceptance.position_accepted,
               r.acceptance.position_drafts)
        groups.setdefault(key, []).append(r.algorithm)
    cases: dict[tuple[str, ...], list[str]] = {}
    for key, names in groups.items():
        if len(set(names)) > 1:
            found = cases.setdefault(tuple(dict.fromkeys(names)), [])
            if key[0] not in found:
                found.append(key[0])
    return [(names, tuple(found)) for names, found in cases.items()]


def _and(names: Sequence[str]) -> str:
    return names[0] if len(names) == 1 else f"{', '.join(names[:-1])} and {names[-1]}"


def notes(rows: Sequence[DemoRow]) -> list[str]:
    """One note per set of algorithms with identical figures, saying why they coincide."""
    needs = {r.algorithm: r.drafts_from for r in rows}
    out = []
    for names, cases in coincidences(rows):
        kinds = {needs.get(n) for n in names}
        reason = (MODEL_REASON if kinds <= MODEL_NEEDS else
                  HISTORY_REASON if kinds == {"token_history"} else OTHER_REASON)
        text = (f"{_and(names)} show the same tok/verify, tok/fwd and acceptance in their "
                f"{_and(cases)} rows: every verify step accepted the same drafts, because "
                f"{reason}.")
        invariant = {(r.invariant_acceptance, r.standard_acceptance) for r in rows
                     if r.algorithm in names and r.case in cases and r.invariant_equal is not None}
        if len(invariant) > 1:
            text += (" Their invariant-mode lines differ: sampled, each drafter draws its drafts "
                     "its own way.")
        out.append(textwrap.fill(text, WIDTH, initial_indent="note: ",
                                 subsequent_indent=" " * 6))
    return out


# ------------------------------------------------------------------------------------ legend
def legend() -> str:
    """What every column and every line under a row means, and what the rows run on."""
    width = max(len(c.header) for c in COLUMNS) + 2
    out = textwrap.wrap(TOY_TEXT, WIDTH) + ["", "Columns:"]
    for column in COLUMNS:
        out += _entry(column.header, column.meaning, width)
    out += ["", "Lines under a row:"]
    for label, meaning in LINES:
        out += textwrap.wrap(f"{label}: {meaning}", WIDTH, initial_indent="  ",
                             subsequent_indent="    ")
    return "\n".join(out)


def _entry(label: str, meaning: str, width: int) -> list[str]:
    return textwrap.wrap(meaning, WIDTH, initial_indent=f"  {label.ljust(width)}",
                         subsequent_indent=" " * (width + 2))


def format_text(rows: Sequence[DemoRow]) -> str:
    """The table, the notes on coinciding figures, and the legend."""
    parts = [format_table(rows)]
    found = notes(rows)
    if found:
        parts.append("\n".join(found))
    parts.append(legend())
    return "\n\n".join(parts)
