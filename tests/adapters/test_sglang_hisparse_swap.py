"""The `hisparse_swap` substitution in SGLang's own process: its coordinator, swap path and
EAGLE's prepare/commit driven on CPU (sglang_hisparse_runtime.py says what is patched and why).

All runs start at once (two CPU cores share them): the runtime script's runs as children of one
framework process that imports SGLang once (one_import.py), beside the GPU script's dry run."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

HERE = Path(__file__).parent
SCRIPT = HERE / "sglang_hisparse_runtime.py"
GPU_COMPARE = HERE.parents[1] / "benchmarks" / "gpu" / "sglang_hisparse_compare.py"
ENFORCE = {"SPECREG_SGLANG": "enforce", "SPECREG_PLUGINS": "eagle,hisparse"}
SUBSTITUTED = {**ENFORCE, "SPECREG_SGLANG_SUBSTITUTE": "hisparse_swap"}
MANAGER = "specreg_hisparse.sglang_seam.SpecregHiSparseSpecSwapManager"
SGLANGS = "sglang.srt.managers.hisparse_coordinator.HiSparseSpecSwapManager"
SGLANGS_REFUSAL = "HiSparse spec swap requires 2-4 draft tokens and top_k >= 1024."
#: (draft tokens, top_k, device_buffer_size, page size): the issue's 1, 5 and 8 steps at
#: SGLang's sizes, its own 2-4, and specreg's two limits (SR183, SR184).
BUILDS = [[1, 1024, 2048, 64], [2, 1024, 2048, 64], [4, 2048, 4096, 64], [5, 1024, 2048, 64],
          [8, 1024, 2048, 64], [8, 2048, 4096, 64], [2, 512, 1024, 64], [16, 256, 512, 64],
          [63, 16, 64, 64], [64, 16, 64, 64], [2, 128, 64, 64]]
#: (draft tokens, top_k) at SGLang's device buffer of 4096: where specreg's HiSparse runtime rules
#: (SR167, SR168) must refuse exactly what SGLang's own manager refuses.
LIMITS = [[d, k] for d in (1, 2, 3, 4, 5, 8) for k in (512, 1024, 2048, 4096)]
CHURN_STEPS = 5000  # per run; two runs (3 and 6 draft tokens): 10,000 verify steps


@pytest.fixture(scope="module")
def runs(framework_env, model_dirs, tmp_path_factory):
    eagle = {"model_path": str(model_dirs["llama"]), "device": "cuda",
             "speculative_algorithm": "EAGLE", "speculative_num_steps": 3}
    plan = {
        "substituted": ({"substitute": "load_plugins", "builds": BUILDS,
                         "swap_path": [[1, 16, 64, 64], [2, 32, 64, 64], [3, 32, 64, 64],
                                       [4, 32, 64, 64], [5, 32, 64, 64], [8, 32, 64, 64]],
                         "contract": [2, 3, 4, 1, 5, 8], "replay": [5, 30, 3], "corrupted": 3,
                         "churn": [3, CHURN_STEPS, 1]},
                        SUBSTITUTED),
        "churn-6": ({"substitute": "load_plugins", "churn": [6, CHURN_STEPS, 2]}, SUBSTITUTED),
        "enforce-only": ({"substitute": "load_plugins", "builds": BUILDS}, ENFORCE),
        "no-specreg": ({"substitute": "off", "builds": BUILDS, "sabotaged": True}, {}),
        "sglang-limits": ({"substitute": "off",
                           "builds": [[d, k, 4096, 64] for d, k in LIMITS]}, {}),
        "not-applied-launch": ({"substitute": "load_plugins_no_apply", "server_args": eagle},
                               SUBSTITUTED),
    }
    folder = tmp_path_factory.mktemp("hisparse-swap")
    # every run of the runtime script in one process: one SGLang import, a child per run
    runtime = {"payload": {}, "runs": {name: {"env": extra, "payload": payload}
                                       for name, (payload, extra) in plan.items()}}
    commands = {
        "runtime": ([str(SCRIPT), "--runs"], runtime),
        "gpu-dry-run": ([str(GPU_COMPARE), "--dry-run", "--steps", "2", "4", "8",
                         "--check-calls", "1"], {}),
    }
    procs = {}
    for name, (command, payload) in commands.items():
        (folder / f"{name}.in").write_text(json.dumps(payload))
        with (folder / f"{name}.in").open() as stdin, (folder / f"{name}.out").open("w") as out, \
                (folder / f"{name}.err").open("w") as err:
            procs[name] = subprocess.Popen([str(framework_env.python), *command],
                                           stdin=stdin, stdout=out, stderr=err,
                                           env=framework_env.subprocess_env())
    for name, proc in procs.items():
        if proc.wait(timeout=900) != 0:
            pytest.fail(f"{name} failed ({proc.returncode}):\n"
                        f"{(folder / f'{name}.err').read_text()[-4000:]}")
    out = json.loads((folder / "runtime.out").read_text().strip().splitlines()[-1])
    out["gpu-dry-run"] = {"text": (folder / "gpu-dry-run.out").read_text()}
    print({name: (round(r["seconds"], 1), round(r["cpu_seconds"], 1))
           for name, r in out.items() if "seconds" in r})
    return out


def by_case(result: dict) -> dict:
    return {tuple(b["case"]): b for b in result["builds"]}


def test_with_the_substitution_sglangs_coordinator_builds_specregs_manager_for_any_steps(runs):
    out = runs["substituted"]
    assert out["manager_class"] == MANAGER and out["installed"]
    assert out["active"] == ["hisparse_swap"]
    assert any("pid " in line and "SGLang runtime substitutions active: hisparse_swap" in line
               for line in out["log"]), out["log"]
    builds = by_case(out)
    for case in ([1, 1024, 2048, 64], [2, 1024, 2048, 64], [4, 2048, 4096, 64],
                 [5, 1024, 2048, 64], [8, 1024, 2048, 64], [8, 2048, 4096, 64],
                 [2, 512, 1024, 64], [16, 256, 512, 64], [63, 16, 64, 64]):
        assert builds[tuple(case)]["built"] and builds[tuple(case)]["manager"] == MANAGER, case
    # scratch: one call's misses beyond the hot buffer, in whole pages (SGLang's allocator)
    assert builds[(1, 1024, 2048, 64)]["scratch_capacity"] == 0
    assert builds[(5, 1024, 2048, 64)]["scratch_capacity"] == 5 * 1024 - 2048
    assert builds[(8, 2048, 4096, 64)]["scratch_capacity"] == 8 * 2048 - 4096
    # specreg's own limits, coded, in SGLang's flags
    assert builds[(64, 16, 64, 64)]["code"] == "SR184" and not builds[(64, 16, 64, 64)]["built"]
    assert builds[(2, 128, 64, 64)]["code"] == "SR183"
    assert "--speculative-num-draft-tokens 63" in builds[(64, 16, 64, 64)]["message"]


def test_without_the_substitution_sglang_refuses_as_before(runs):
    """Enforce mode alone, and no specreg at all: SGLang's class, the same refusals, word for
    word, case for case."""
    plain, enforce = by_case(runs["no-specreg"]), by_case(runs["enforce-only"])
    assert runs["no-specreg"]["manager_class"] == runs["enforce-only"]["manager_class"] == SGLANGS
    for name in ("no-specreg", "enforce-only"):
        assert not runs[name]["installed"] and runs[name]["active"] == [], name
    assert plain == enforce
    accepted = {case for case, b in plain.items() if b["built"]}
    assert accepted == {(2, 1024, 2048, 64), (4, 2048, 4096, 64)}
    for case, build in plain.items():
        if case not in accepted:
            assert build["message"] == SGLANGS_REFUSAL and build["error"] == "ValueError", case


def test_hisparse_codes_match_what_sglangs_own_swap_manager_refuses(runs):
    """specreg's HiSparse runtime rules refuse (SR167, SR168) exactly the (draft tokens, top_k)
    pairs SGLang's own manager refuses (a ValueError of its own), at SGLang's device buffer."""
    from specreg.framework_args.rules import hisparse_runtime_problems

    facts = {"enable_hisparse": True, "disable_radix_cache": True,
             "target_architecture": "DeepseekV32ForCausalLM"}
    built = by_case(runs["sglang-limits"])
    assert runs["sglang-limits"]["manager_class"] == SGLANGS
    for draft, top_k in LIMITS:
        found = hisparse_runtime_problems({**facts, "hisparse_config": {"top_k": top_k}}, 1, draft)
        codes = {p.code for p in found}
        assert codes <= {"SR167", "SR168"}
        build = built[(draft, top_k, 4096, 64)]
        assert build["built"] == (not codes), (draft, top_k, build, codes)
        if codes:  # its draft-token and top_k rule, or its occurrence capacity (3 x 4096)
            assert build["error"] == "ValueError", build
            assert build["message"].startswith("HiSparse spec swap "), build


def test_sglangs_swap_path_serves_every_selected_token_from_the_right_row(runs):
    """Two requests (one beyond the device buffer, one within) verified through SGLang's own
    prepare_spec_verify / swap_in_selected_pages / commit_spec_accept_tokens: every valid
    selected token's device row holds what the host cache (or the verify) wrote for it."""
    for result in runs["substituted"]["swap_path"]:
        ndt = result["case"][0]
        assert result["verify_steps"] == 6 and result["swap_calls"] == 12, result
        assert result["checked_tokens"] >= 6 * 2 * 2 * ndt * 10, result
    assert runs["substituted"]["corrupted"].startswith("slot 0 token "), (
        "negative control: a corrupted host row must be caught")


def test_nothing_is_lost_over_ten_thousand_steps_with_requests_joining_and_leaving(runs):
    total = {"verify_steps": 0, "checked_tokens": 0, "joined": 0, "left": 0}
    for name in ("substituted", "churn-6"):
        churn = runs[name]["churn"]
        for key in total:
            total[key] += churn[key]
        hits, misses, _ = churn["totals"]
        assert hits > 0 and misses > 0, churn  # both paths taken, many times
    assert total["verify_steps"] >= 10_000
    assert total["joined"] >= 40 and total["left"] >= 40, total
    print(f"churn: {total}")


def test_the_anchors_miss_plan_replays_into_the_shared_index_layer(runs):
    """Layer 1 reuses layer 0's top-k (SGLang's shared-index prefetch): the anchor records its
    plan, SGLang's prefetch path replays it, and layer 1's rows are checked like layer 0's."""
    replay = runs["substituted"]["replay"]
    assert replay["prefetch"] and replay["replayed_layers"] == 30
    assert replay["planned_rows"] > 0 and replay["checked_tokens"] > 0


#: The contract cases per draft-token count: [satisfied, occurrences]; a change shows here.
CONTRACT = {
    2: {"extra_page": [8, 8], "host_miss": [12, 12], "hot_hit": [6, 6], "invalid": [22, 22]},
    3: {"extra_page": [15, 15], "host_miss": [17, 17], "hot_hit": [10, 10], "invalid": [30, 30]},
    4: {"extra_page": [24, 24], "host_miss": [24, 24], "hot_hit": [12, 12], "invalid": [36, 36]},
    1: {"extra_page": [3, 3], "host_miss": [6, 6], "hot_hit": [3, 3], "invalid": [12, 12]},
    5: {"extra_page": [35, 35], "host_miss": [30, 30], "hot_hit": [15, 15], "invalid": [40, 40]},
    8: {"extra_page": [80, 80], "host_miss": [29, 29], "hot_hit": [37, 37], "invalid": [46, 46]},
}


def test_two_to_four_steps_give_the_locations_sglangs_contract_promises(runs):
    """SGLang's kernel contract (sglang_hisparse_runtime.contract), case by case, at 2-4 steps
    and beyond: hits and extra-page tokens on exactly the rows SGLang's tables name, misses on
    the request's own unread rows (one per token), -1 for invalid entries, 0 for padding rows."""
    for result in runs["substituted"]["contract"]:
        ndt = result["ndt"]
        cases = result["cases"]
        assert {k: cases[k] for k in CONTRACT[ndt]} == CONTRACT[ndt], (ndt, cases)
        assert cases["miss_rows_distinct_and_unread"] == [2, 2]
        assert cases["padding_row_zero"] == [1, 1]


def test_a_hook_sglang_does_not_apply_or_a_moved_seam_is_sr182(runs):
    no_apply, moved = runs["no-specreg"]["sabotaged"].values()
    assert no_apply["codes"] == ["SR182"] and no_apply["manager_class"] == "HiSparseSpecSwapManager"
    assert "did not apply the hook" in no_apply["message"]
    assert moved["codes"] == ["SR182"] and moved["manager_class"] == "HiSparseSpecSwapManager"
    assert f"{SGLANGS}.commit_accept_tokens" in moved["message"]


def test_a_failed_substitution_stops_the_launch_instead_of_running_sglangs_manager(runs):
    """SGLang's plugin loader only logs what a plugin raises; the adapter keeps the SR182 and
    its resolution step raises it, so ServerArgs never resolves with SGLang's manager in place."""
    out = runs["not-applied-launch"]
    assert out["manager_class"] == SGLANGS
    assert out["server_args"]["error"] == "PluginError" and out["server_args"]["codes"] == ["SR182"]


def test_the_gpu_comparison_script_dry_runs_on_cpu(runs):
    """benchmarks/gpu/sglang_hisparse_compare.py on CPU: both managers built by their own
    constructors over the same tables, specreg's answers checked row by row, and SGLang's
    wrapper given the same arguments at 2 and 4 steps (its launch recorded, not run)."""
    lines = runs["gpu-dry-run"]["text"].splitlines()
    rows = {int(line.split()[0]): line.split() for line in lines if line[:5].strip().isdigit()}
    assert sorted(rows) == [2, 4, 8]
    assert all(int(row[5]) > 0 for row in rows.values())  # tokens checked on specreg's side
    assert "SGLang's kernel takes 2-4 steps" in " ".join(rows[8])
    (accepted,) = [line for line in lines if line.startswith("dry run:")]
    assert "accepted 8 launches" in accepted, accepted  # 4 calls at 2 steps and 4 at 4
