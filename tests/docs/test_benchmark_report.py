"""benchmarks/run_cpu.py's report: peer rows from PEER lines, targets met or not, one table per
job on the benchmarks page (never one per issue)."""

from __future__ import annotations

import importlib.util
import re
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def run_cpu():
    spec = importlib.util.spec_from_file_location("run_cpu", ROOT / "benchmarks" / "run_cpu.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _floors():
    sys.path.insert(0, str(ROOT / "benchmarks"))
    import floors

    return floors


OUTPUT = "\n".join([
    "filters: 64 rows",
    _floors().peer_line("filter, top_k 50 / vLLM apply_top_k_top_p", 0.006, "vLLM (torch path)",
                        0.0075, "same kept set (3200 tokens)"),
    _floors().peer_line("filter and draw, top_k 50 / SGLang sampler", 0.017, "SGLang", 0.0072,
                        "same kept set"),
    "BOUND filter and draw, top_k 50 / SGLang sampler: aten::lt 15%, aten::topk 9%",
    _floors().absent_line("ngram drafter / vLLM NgramProposer (numba)",
                          "numba is not installed:\n pip failed"),
])


def test_peer_lines_become_rows_with_targets_bounds_and_absences(run_cpu):
    rows = {r["label"]: r for r in run_cpu.rows_of("peers", ["x.py"], [], OUTPUT)}
    met = rows["filter, top_k 50 / vLLM apply_top_k_top_p"]
    assert met["value"] == pytest.approx(0.8) and met["target"] == 1.0 and met["met"] is True
    assert met["kind"] == "peer ratio" and met["job"] == "sampling filters and parameters"
    missed = rows["filter and draw, top_k 50 / SGLang sampler"]
    assert missed["met"] is False and missed["bound"] == "aten::lt 15%, aten::topk 9%"
    absent = rows["ngram drafter / vLLM NgramProposer (numba)"]
    assert absent["value"] is None and absent["met"] is None and absent["job"] == "drafters"
    assert absent["absent"] == "numba is not installed: pip failed"  # one line, said in full


def test_a_pattern_that_matched_nothing_says_so(run_cpu):
    (row,) = run_cpu.rows_of("plan", ["benchmarks/bench_plan.py"],
                             [("plan / direct", r"plan = ([\d.]+)x", "lower", 1.5)], "nothing")
    assert row["value"] is None and "printed no line matching" in row["absent"]


def test_the_report_is_one_table_per_job_with_met_and_the_load_average(run_cpu, tmp_path):
    rows = run_cpu.rows_of("peers", ["x.py"], [], OUTPUT) + run_cpu.rows_of(
        "hisparse", ["h.py"], [], "FLOOR HiSparse swap: kernel 4.582 ms, floor 0.567 ms (copy) "
        "-> 8.08x the floor")
    data = {"when": "now", "machine": "m", "cpus": 2, "load_average_start": [0.5, 0.6, 0.7],
            "load_average_end": [0.9, 0.8, 0.7], "ratios": rows}
    text = run_cpu.markdown(data)
    headings = re.findall(r"^### (.+)$", text, flags=re.MULTILINE)
    assert headings == ["Sampling filters and parameters", "Drafters", "HiSparse swap"]
    assert "0.5, 0.6, 0.7 at the start and 0.9, 0.8, 0.7 at the end" in text
    assert "| HiSparse swap / floor | 8.08x the floor (4.58 / 0.57 ms) | <= 2x | not met |" in text
    printed = run_cpu.printout(data)
    assert "[0.5, 0.6, 0.7] at the start" in printed and "not met" in printed
    page = tmp_path / "page.md"
    page.write_text(f"# B\n\nbefore\n{run_cpu.RESULTS_BEGIN}\nold\n{run_cpu.RESULTS_END}\nafter\n")
    run_cpu.PAGE = page
    assert run_cpu.write_page(data)
    written = page.read_text()
    assert "old" not in written and written.startswith("# B\n\nbefore\n")
    assert written.endswith("after\n") and "### Drafters" in written


def test_every_run_row_has_a_job(run_cpu):
    for name, _, patterns in run_cpu.RUNS:
        for label, *_ in patterns:
            assert run_cpu.job_of(name, label) in run_cpu.JOBS



def test_the_benchmarks_page_is_organised_by_job_not_by_issue(run_cpu):
    page = (ROOT / "docs" / "benchmarks.md").read_text(encoding="utf-8")
    assert run_cpu.RESULTS_BEGIN in page and run_cpu.RESULTS_END in page
    assert not re.search(r"[Ii]ssues? #\d+|\(#\d+\)|before #\d+|after #\d+", page)
    for job in run_cpu.JOBS:
        assert f"### {job[0].upper()}{job[1:]}" in page
