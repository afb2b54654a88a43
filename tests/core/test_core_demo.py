"""`specreg demo`: the README's main job."""

import json
import subprocess
import sys

from specreg import Registry, hookimpl
from specreg.demo import run_demo
from specreg.demo_text import format_table
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


def test_demo_plot(tmp_path):
    out = tmp_path / "accept.png"
    result = subprocess.run(
        [sys.executable, "-m", "specreg", "demo", "--algorithm", "dflash", "--kv-cache", "none",
         "--steps", "16", "--plot", str(out)],
        capture_output=True, text=True,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert out.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "3/3 rows lossless" in result.stdout  # default + mixed params + json schema


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
