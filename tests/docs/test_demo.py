"""The quickstart shows `specreg demo`'s output as the demo prints it now: its table has the
demo's columns in the demo's order, its notes explain the algorithms that coincide, and its
legend is the demo's legend word for word."""

from __future__ import annotations

import re
from pathlib import Path

from specreg.cli.demo_text import COLUMNS, legend

QUICKSTART = Path(__file__).parents[2] / "docs" / "index.md"


def _text_blocks() -> list[str]:
    return re.findall(r"```text\n(.*?)```", QUICKSTART.read_text(encoding="utf-8"), re.DOTALL)


def _sample() -> list[str]:
    return next(b for b in _text_blocks() if b.startswith("algorithm ")).splitlines()


def test_the_quickstart_legend_is_the_demo_legend():
    assert legend() + "\n" in _text_blocks()


def test_the_quickstart_table_has_the_demo_columns():
    lines = _sample()
    assert re.split(r"\s{2,}", lines[0].strip()) == [c.header for c in COLUMNS]
    assert lines[1] == "-" * len(lines[0])
    rows = [line for line in lines[2:] if line and not line.startswith((" ", "note:"))]
    assert len(rows) > 10
    for line in rows:
        cells = re.split(r"\s{2,}", line.strip())
        assert len(cells) == len(COLUMNS) and cells[5] == "pass", line
        assert "=[]" not in line and "=None" not in line, line


def test_the_quickstart_output_explains_what_coincides_and_shows_history_drafters_at_work():
    text = "\n".join(_sample())
    assert "note: draft_model, eagle and eagle3 show the same" in text
    for name in ("ngram", "suffix"):
        rate = re.search(rf"^{name} +default +none .*\n +acceptance by draft position: .*"
                         r"\(all positions (\d\.\d\d)", text, re.MULTILINE)
        assert rate and float(rate.group(1)) > 0.2, name
