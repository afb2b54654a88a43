"""specreg.registry.distributed.check_consistent across real gloo process groups on the CPU.

Three worker processes are started once per module; each runs every scenario of
`_distributed_worker.py` and writes what it raised. The tests read those results.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from specreg import ConfigError, ConsistencyError, Registry
from specreg.registry.distributed import check_consistent, compare_fingerprints
from tests.support.plugins import ToyPlugin

HERE = Path(__file__).resolve().parent
REPO = HERE.parents[1]  # tests.support.plugins holds the entry points
WORLD = 3
SCENARIOS = (
    "equal",
    "allowlist",
    "extra_plugin",
    "plugin_version",
    "config",
    "rank0_odd",
    "backend",
    "backend_after_resolve",
    "fingerprint_error",
)


def _write_entry_points(root: Path) -> None:
    info = root / "consistency_test_plugins-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        "Metadata-Version: 2.1\nName: consistency-test-plugins\nVersion: 0.1\n", encoding="utf-8"
    )
    (info / "entry_points.txt").write_text(
        "[specreg_consistency_test]\n"
        "toy = tests.support.plugins:toy\n"
        "extra = tests.support.plugins:extra\n",
        encoding="utf-8",
    )


@pytest.fixture(scope="module")
def results(tmp_path_factory) -> list[dict]:
    root = tmp_path_factory.mktemp("consistency")
    _write_entry_points(root)
    env = dict(os.environ)
    env.pop("SPECREG_KERNEL_BACKEND", None)
    env.pop("SPECREG_PLUGINS", None)
    env.pop("WORLD_SIZE", None)
    env["PYTHONPATH"] = os.pathsep.join([str(root), str(REPO), env.get("PYTHONPATH", "")])
    init_file = root / "init"
    procs = [
        subprocess.Popen(
            [
                sys.executable,
                str(HERE / "_distributed_worker.py"),
                str(r),
                str(WORLD),
                str(init_file),
                str(root),
            ],
            env=env,
            stdout=subprocess.PIPE,
            stderr=subprocess.STDOUT,
            text=True,
        )
        for r in range(WORLD)
    ]
    outputs = []
    try:
        for proc in procs:
            out, _ = proc.communicate(timeout=90)
            outputs.append(out)
    finally:
        for proc in procs:
            if proc.poll() is None:
                proc.kill()
    for rank, (proc, out) in enumerate(zip(procs, outputs, strict=True)):
        assert proc.returncode == 0, f"rank {rank} failed:\n{out}"
    return [json.loads((root / f"rank{r}.json").read_text()) for r in range(WORLD)]


def test_every_rank_reaches_the_same_verdict(results):
    for scenario in SCENARIOS:
        verdicts = [r[scenario] for r in results]
        assert all(v == verdicts[0] for v in verdicts), (scenario, verdicts)
    assert results[1]["subgroup"] == results[2]["subgroup"]
    assert "subgroup" not in results[0]
    assert results[0]["outside_subgroup"] == {"ok": True}


def test_equal_plans_pass(results):
    assert all(r["equal"] == {"ok": True} for r in results)


def _single(result: dict) -> tuple[str, str]:
    assert result.get("error") == "ConsistencyError", result
    assert result["codes"] == ["SR120"], result
    return result["messages"][0], result["fields"][0]


def test_rank_with_a_different_allowlist_is_named(results):
    message, field = _single(results[0]["allowlist"])
    assert message.startswith("rank 1 ")
    assert field == "plugins"
    assert "extra==0.1" in message and "toy==0.1" in message
    assert "reference held by rank 0 on" in message and "2 of 3 ranks" in message


def test_rank_with_an_extra_in_process_plugin_is_named(results):
    message, field = _single(results[2]["extra_plugin"])
    assert message.startswith("rank 1 ") and field == "plugins"
    assert "only here: ['extra==1.0']" in message


def test_rank_with_another_plugin_version_shows_both_versions(results):
    message, field = _single(results[0]["plugin_version"])
    assert message.startswith(f"rank {WORLD - 1} ") and field == "plugins"
    assert "toy==0.2" in message and "toy==0.1" in message


def test_rank_with_another_config_names_gamma_and_widths(results):
    message, field = _single(results[0]["config"])
    assert message.startswith("rank 1 ")
    fields = field.split(", ")
    assert "gamma" in fields and "widths.target.target_verify" in fields
    assert "gamma: rank 1" in message and "has 4, the reference has 3" in message


def test_majority_wins_over_rank_zero(results):
    message, _ = _single(results[1]["rank0_odd"])
    assert message.startswith("rank 0 ")
    assert "gamma" in message and "has 5, the reference has 3" in message


def test_rank_with_another_kernel_backend_is_named(results):
    message, field = _single(results[0]["backend"])
    assert message.startswith(f"rank {WORLD - 1} ")
    assert field == "kernel_backends.cuda"
    assert "'torch'" in message and "'triton'" in message


def test_kernel_backend_is_fixed_when_the_plan_is_resolved(results):
    assert all(r["backend_after_resolve"] == {"ok": True} for r in results)


def test_rank_that_cannot_fingerprint_fails_every_rank(results):
    message, field = _single(results[0]["fingerprint_error"])
    assert message.startswith(f"rank {WORLD - 1} ") and field == "fingerprint"
    assert "SR116" in message


def test_subgroup_ranks_are_named_with_their_global_rank(results):
    message, _ = _single(results[1]["subgroup"])
    assert message.startswith("rank 1 (global rank 2) ")
    assert "reference held by rank 0 (global rank 1)" in message


# ------------------------------------------------------------------- without a process group
def _plan():
    registry = Registry()
    registry.register_plugin(ToyPlugin(), "toy", distribution="toy-dist", version="0.1")
    return registry.resolve({"algorithm": "toy"})


def test_single_process_without_process_group_is_a_no_op(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    assert check_consistent(_plan()) is None
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert check_consistent(_plan()) is None


def test_multi_process_job_without_process_group_is_an_error(monkeypatch):
    monkeypatch.setenv("WORLD_SIZE", "4")
    with pytest.raises(ConsistencyError) as info:
        check_consistent(_plan())
    assert info.value.code == "SR121"
    assert "WORLD_SIZE=4" in str(info.value) and "init_process_group" in str(info.value)


def test_single_process_reports_a_fingerprint_it_cannot_compute(monkeypatch):
    monkeypatch.delenv("WORLD_SIZE", raising=False)
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "triton")
    plan = _plan()  # triton forced at resolve; then no interpreter for CPU tensors
    monkeypatch.setenv("TRITON_INTERPRET", "0")
    with pytest.raises(ConsistencyError, match="SR116"):
        check_consistent(plan)


def test_a_bad_backend_variable_fails_the_resolve(monkeypatch):
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "cuda")
    with pytest.raises(ConfigError) as info:
        _plan()
    assert info.value.code == "SR116" and "SPECREG_KERNEL_BACKEND" in str(info.value)


# -------------------------------------------------------------------------- pure comparison
FP = {
    "algorithm": "toy",
    "cache": None,
    "plugins": ["toy==0.1"],
    "gamma": 3,
    "widths": {"target": {"target_verify": 4}},
    "kernel_backends": {"cpu": "torch", "cuda": "triton"},
}


def test_tie_goes_to_the_lowest_rank():
    other = {**FP, "gamma": 2}
    (found,) = compare_fingerprints([other, FP])
    assert found.message.startswith("rank 1 ") and "has 3, the reference has 2" in found.message
    (found,) = compare_fingerprints([FP, other])
    assert found.message.startswith("rank 1 ") and "has 2, the reference has 3" in found.message


def test_every_differing_rank_gets_a_problem():
    found = compare_fingerprints([FP, {**FP, "cache": "hisparse"}, FP, {**FP, "algorithm": "x"}])
    assert [p.field for p in found] == ["cache", "algorithm"]
    assert "rank 1 has 'hisparse', the reference has None" in found[0].message
    assert found[1].message.startswith("rank 3 ")


def test_missing_field_is_shown_as_missing():
    partial = {k: v for k, v in FP.items() if k != "cache"}
    (found,) = compare_fingerprints([FP, FP, partial], labels=["a", "b", "c"])
    assert "cache: c has <missing>, the reference has None" in found.message


def test_identical_fingerprints_have_no_problems():
    assert compare_fingerprints([FP, dict(FP), FP]) == []


def test_importing_the_module_does_not_import_torch():
    code = "import specreg, specreg.registry.distributed, sys; assert 'torch' not in sys.modules"
    subprocess.run([sys.executable, "-c", code], check=True)
