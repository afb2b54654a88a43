"""`specreg demo`: the README's main job."""

import json
import subprocess
import sys

import pytest

from specreg import Registry, hookimpl
from specreg.cli.demo import run_demo
from specreg.cli.demo_text import format_table
from tests.support.cli import specreg
from tests.support.plugins import SpecPlugin


def test_demo_json_is_machine_readable_and_lossless():
    result = subprocess.run(
        [sys.executable, "-m", "specreg", "demo", "--json", "--algorithm", "dflash",
         "--algorithm", "eagle", "--steps", "24"],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stderr
    data = json.loads(result.stdout)
    assert data["all_lossless"] is True
    rows = data["rows"]
    assert {(r["algorithm"], r["cache"]) for r in rows} >= {
        ("dflash", "-"), ("dflash", "hisparse"), ("eagle", "-"), ("eagle", "hisparse"),
    }
    mixed = [r for r in rows if r["case"] == "mixed params"]
    assert sorted(r["algorithm"] for r in mixed) == ["dflash", "eagle"]  # block and tree verifiers
    for row in mixed:
        checks = row["sampling_checks"]
        assert len(checks) == len(row["sampling_p_values"]) == 5  # every sampled kind
        for needed in ("T=0.7", "top_k=", "top_p=", "min_p="):
            assert any(needed in c for c in checks), checks
        assert all(p > 1e-3 for p in row["sampling_p_values"])
    constrained = [r for r in rows if r["case"] == "json schema"]
    assert sorted(r["algorithm"] for r in constrained) == ["dflash", "eagle"]
    for row in constrained:
        assert row["grammar_violations"] == 0 and row["sampling_checks"] == ["first two tokens T=1"]
    for row in rows:
        assert row["lossless"] and row["greedy_lossless"] and row["sampling_lossless"]
        assert row["mean_accepted_length"] >= 1.0
        assert row["backend"] == "torch"
        assert sum(row["accept_length_histogram"].values()) > 0
        if row["cache"] == "hisparse":
            assert 0.0 < row["hit_rate"] < 1.0 and row["bytes_copied"] > 0


@pytest.fixture(scope="module")
def text_demo(tmp_path_factory):
    """One text-mode `specreg demo` for the output tests: a block verifier and a tree one, no
    cache (spelt NONE: the flag takes any case), with a plot and metrics."""
    folder = tmp_path_factory.mktemp("demo")
    paths = {"plot": folder / "accept.png", "metrics": folder / "m.prom"}
    run = specreg("demo", "--kv-cache", "NONE", "--algorithm", "dflash", "--algorithm", "eagle",
                  "--steps", "8", "--plot", str(paths["plot"]), "--metrics", str(paths["metrics"]),
                  "--no-progress")
    assert run.returncode == 0, run.stdout + run.stderr
    return run.stdout, paths


def test_demo_plot(text_demo):
    out, paths = text_demo
    assert paths["plot"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    # each: default, mixed params, json schema; eagle also its "tree k4" case
    assert "7/7 rows lossless" in out


def test_demo_accepts_kv_cache_none_and_prints_the_threshold_beside_every_p_value(text_demo):
    out, _ = text_demo
    lines = [x for x in out.splitlines() if "first tokens (chi-square)" in x]
    assert len(lines) == 2, out  # each algorithm's mixed-params row
    for line in lines:
        p_values = line.count(" p=")
        assert p_values == 5 and line.count("> 0.001") + line.count("<= 0.001") == p_values, line


def test_demo_prints_and_exports_acceptance(text_demo, tmp_path):
    from prometheus_client.parser import text_string_to_metric_families

    out, paths = text_demo
    assert "acceptance by draft position:" in out
    names = {f.name for f in text_string_to_metric_families(paths["metrics"].read_text())}
    assert "specreg_spec_position_acceptance_rate" in names
    assert (paths["plot"].parent / "accept-positions.png").stat().st_size > 0
    missing = specreg("demo", "--metrics", str(tmp_path / "no" / "m.prom"))
    assert missing.returncode != 0 and "SR144" in missing.stdout + missing.stderr


def test_demo_flags_a_lossy_algorithm():
    class Lossy(SpecPlugin):
        algorithms = ("lossy",)

        @hookimpl
        def specreg_resolve_gamma(self, config, algorithm):
            return None

        @hookimpl
        def specreg_num_tokens_per_req(self, algorithm, phase):
            # a width that disagrees with the verifier's shapes: the loop must not pass it
            return 7 if algorithm.name == "lossy" and phase == "target_verify" else None

    registry = Registry()
    registry.register_plugin(Lossy(), "lossy")
    rows = run_demo(kv_cache="none", steps=8, registry=registry)
    # resolve refuses the plan (the verifier was built for another width), so the row fails
    # with the code, and the rows that need a plan (mixed params, json schema) are not made
    assert [r.case for r in rows] == ["default"]
    assert not rows[0].lossless and "[SR126]" in rows[0].error
    assert "FAIL" in format_table(rows) or "ERROR" in format_table(rows)
