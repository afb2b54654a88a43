"""`specreg demo`'s text: aligned columns at any algorithm-name length, no empty config
fields, a note with the reason wherever algorithms show the same figures, a legend for every
column and line, and plots with full titles."""

from __future__ import annotations

import pytest

from specreg.step.acceptance_stats import AcceptanceSnapshot
from specreg.cli.demo import DemoRow
from specreg.cli.demo_output import row_title
from specreg.cli.demo_text import COLUMNS, LINES, format_table, format_text, legend, notes


def _row(algorithm, *, accepted=(3, 1), lengths=(2, 3, 1), cache="-", drafts_from="draft_model",
         case="default", **fields):
    snapshot = AcceptanceSnapshot(
        verify_steps=3, request_steps=3, draft_tokens=6, accepted_tokens=sum(accepted),
        emitted_tokens=sum(accepted) + 3, position_drafts=(3, 3), position_accepted=accepted,
    )
    return DemoRow(
        algorithm, case, cache,
        {"algorithm": algorithm, "num_steps": 2, "substitutions": [], "cache_options": None},
        mean_accepted_length=2.0, tokens_per_target_forward=1.5, greedy_lossless=True,
        sampling_lossless=True, backend="torch", accept_lengths=list(lengths),
        acceptance=snapshot, drafter="plugin", drafts_from=drafts_from, **fields,
    )


def test_columns_stay_aligned_at_any_name_length():
    rows = [_row("a"), _row("an_algorithm_with_a_long_name", accepted=(1, 0), cache="hisparse",
                            hit_rate=0.5, bytes_copied=1234.0)]
    table = format_table(rows).splitlines()
    head, data = table[0], [line for line in table[2:] if not line.startswith(" ")]
    # every right-aligned column ends where its header ends, every left one starts there
    for column in COLUMNS:
        start = head.index(column.header)
        for line in data:
            cell = column.cell(rows[data.index(line)])
            if column.right:
                assert line[start + len(column.header) - len(cell):start + len(column.header)] \
                    == cell, (column.header, line)
            elif cell:
                assert line[start:start + len(cell)] == cell, (column.header, line)


def test_no_empty_config_fields():
    table = format_table([_row("x")])
    assert "substitutions" not in table and "cache_options" not in table
    assert "num_steps=2" in table


def test_a_note_says_which_algorithms_coincide_and_why():
    rows = [_row("model_a"), _row("model_b", drafts_from="target_hidden_states"),
            _row("lookup_a", accepted=(1, 0), lengths=(1, 2, 1), drafts_from="token_history"),
            _row("lookup_b", accepted=(1, 0), lengths=(1, 2, 1), drafts_from="token_history"),
            _row("alone", accepted=(2, 2), lengths=(3, 3, 1))]
    found = notes(rows)
    assert len(found) == 2
    assert found[0].startswith("note: model_a and model_b show the same tok/verify, tok/fwd and "
                               "acceptance in their default rows")
    flat = [" ".join(note.split()) for note in found]
    assert "same toy draft model" in flat[0]
    assert "look up the same token history" in flat[1] and "alone" not in " ".join(flat)
    assert "\n".join(found) in format_text(rows)


def test_a_note_says_when_the_sampled_invariant_figures_differ():
    rows = [_row("a", invariant_equal=True, invariant_acceptance=0.4, standard_acceptance=0.5),
            _row("b", invariant_equal=True, invariant_acceptance=0.3, standard_acceptance=0.5)]
    assert "invariant-mode lines differ" in notes(rows)[0]
    rows[1].invariant_acceptance = 0.4
    assert "invariant-mode lines differ" not in notes(rows)[0]


def test_rows_of_other_cases_or_caches_never_coincide():
    rows = [_row("a"), _row("b", cache="hisparse"), _row("c", case="tree k4")]
    assert notes(rows) == []


def test_the_legend_explains_every_column_and_line():
    text = legend()
    for column in COLUMNS:
        assert f"  {column.header} " in text, column.header
    for label, _ in LINES:
        assert f"  {label}: " in text, label
    assert all(len(line) <= 100 for line in text.splitlines())
    assert text in format_text([_row("x")])


@pytest.mark.parametrize(("cache", "title"), [("-", "eagle, default, no KV cache"),
                                              ("hisparse", "eagle, default, hisparse cache")])
def test_plot_titles_are_full(cache, title):
    assert row_title(_row("eagle", cache=cache)) == title
