"""The SGLang adapter loaded by SGLang's own plugin loader, in enforce, shadow and off modes."""

from __future__ import annotations

from pathlib import Path

import pytest

from specreg.registry.registry import Registry
from tests.adapters import parity  # the parity grid's own cases, as it widens
from tests.adapters.conftest import runs_per_mode

HERE = Path(__file__).parent


DFLASH_NS = (2, 3, 4, 5, 6, 7)  # below the dflash-draft checkpoint's block of 8


@pytest.fixture(scope="module")
def cases(model_dirs):
    llama, dspark = str(model_dirs["llama"]), str(model_dirs["dspark-draft"])
    dflash = str(model_dirs["dflash-draft"])
    base = [
        {"model_path": llama, "device": "cuda", "speculative_algorithm": "EAGLE", "speculative_num_steps": 3},
        {"model_path": llama, "device": "cuda", "speculative_algorithm": "DSPARK",
         "speculative_num_draft_tokens": 1, "speculative_draft_model_path": dspark},
        {"model_path": llama, "device": "cuda", "speculative_algorithm": "EAGLE"},
        {"model_path": llama, "device": "cuda", "speculative_algorithm": "EAGLE",
         "speculative_num_steps": 2, "speculative_eagle_topk": 4},
    ]
    dflash_cases = [
        {"model_path": llama, "device": "cuda", "speculative_algorithm": "DFLASH",
         "speculative_num_draft_tokens": n, "speculative_draft_model_path": dflash}
        for n in DFLASH_NS
    ]
    # the repeated tree config: shadow mode logs its disagreement once
    plain = {"model_path": llama, "device": "cuda"}  # no speculative flags
    # the example: specreg refuses (draft tokens 1 for a tree), SGLang resolves
    refused = {"model_path": llama, "device": "cuda", "speculative_algorithm": "EAGLE",
               "speculative_num_steps": 3, "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 1}
    return {"base": base, "dflash": dflash_cases, "refused": refused,
            "all": base + [base[3]] + dflash_cases + [refused, refused, plain]}


def rule_key(case: dict) -> tuple[str, str]:
    """What both rules read: SGLang's auto params read the algorithm and the target's
    architecture, its HiSparse target test the target's config; nothing else of a case."""
    return case["flags"]["speculative_algorithm"], case["flags"]["model_path"]


@pytest.fixture(scope="module")
def grid_cases(parity_models):
    return [{"flags": parity.sglang_flags(c["facts"], parity_models)}
            for c in parity.cases_of("sglang")]


@pytest.fixture(scope="module")
def probes(grid_cases):
    keys = sorted({rule_key(case) for case in grid_cases})
    return [{"key": list(key), "kwargs": {"model_path": key[1], "device": "cuda",
                                         "speculative_algorithm": key[0]}} for key in keys]


@pytest.fixture(scope="module")
def runs(framework_env, cases, probes):
    payload = {"cases": cases["all"], "probes": probes}
    return runs_per_mode(framework_env, str(HERE / "sglang_load.py"), payload, "SPECREG_SGLANG")


def named(out):
    """The results by role: the four base cases, the repeat, and the DFlash cases."""
    results = out["results"]
    return results[:4], results[4], results[5 : 5 + len(DFLASH_NS)]


def test_sglangs_loader_discovers_the_adapter(runs):
    assert "specreg.adapters.sglang:load" in runs(None)["entry_points"]


def test_enforce_resolves_what_sglang_crashes_on_and_fails_early_with_codes(runs):
    out = runs("enforce")
    (eagle, dspark, llama_defaults, tree), _, _ = named(out)
    assert not any("SR163" in line for line in out["adapter_log"])  # the tested release
    # steps 3 with topk unset: SGLang's TypeError becomes specreg's chain (3, 1, 4)
    assert eagle["error"] is None and eagle["values"] == [3, 1, 4]
    # one DSpark draft token: a ValueError with SR300 and its fix, raised during argument resolution
    assert dspark["is_value_error"] and "SR300" in dspark["message"] and "Fix:" in dspark["message"]
    assert llama_defaults["values"] == [5, 4, 8]
    # SGLang leaves draft tokens None here; the width function answers from specreg's plan
    plan = Registry.load().resolve({"algorithm": "eagle", "num_steps": 2, "topk": 4})
    assert tree["values"] == [2, 4, plan.config.num_draft_tokens]
    for worker in ("target", "draft"):
        for phase, width in tree["widths"][worker].items():
            assert width == plan.num_tokens_per_req(phase, worker == "draft")


def test_enforced_dflash_widths_are_the_block_sglangs_worker_runs(runs):
    """SGLang 0.5.23's DFlash worker runs a block of n = speculative_num_draft_tokens: the verify
    and extend widths specreg answers (also the draft worker's verify asked with num_draft_tokens
    given, as SGLang's model runner asks it) are SGLang's own, n, for a checkpoint block of 8 and
    n 2..7 (before, specreg answered the checkpoint's 8 on the draft worker)."""
    _, _, enforced = named(runs("enforce"))
    _, _, alone = named(runs(None))
    for n, ours, theirs in zip(DFLASH_NS, enforced, alone, strict=True):
        assert ours["error"] is None and theirs["error"] is None, (ours, theirs)
        assert ours["values"] == theirs["values"] == [1, 1, n]
        for worker in ("target", "draft"):
            for phase in ("target_verify", "draft_extend"):
                assert ours["widths"][worker][phase] == theirs["widths"][worker][phase] == n
            # draft_decode: SGLang's function answers topk (1), which no DFlash code of 0.5.23
            # reads (deviation row sglang-block-draft-widths); specreg answers the block, n
            assert theirs["widths"][worker]["draft_decode"] == 1
            assert ours["widths"][worker]["draft_decode"] == n
        assert ours["draft_verify_at"] == theirs["draft_verify_at"] == {"2": 2, str(n): n}


def test_off_leaves_sglang_exactly_as_without_specreg(runs):
    (eagle, dspark, llama_defaults, tree), _, _ = named(runs(None))
    assert eagle["error"] == "TypeError"
    assert dspark["is_value_error"] and "SR300" not in dspark["message"]
    assert llama_defaults["values"] == [5, 4, 8]
    assert tree["values"] == [2, 4, None] and tree["widths"]["target"]["target_verify"] is None


def test_shadow_lets_sglang_decide_and_logs_each_disagreement_once(runs):
    out = runs("shadow")
    (eagle, dspark, llama_defaults, tree), tree_again, _ = named(out)
    assert eagle["error"] == "TypeError" and dspark["is_value_error"]
    assert "SR300" not in dspark["message"]  # SGLang's own message
    assert llama_defaults["values"] == [5, 4, 8]
    assert tree["values"] == tree_again["values"] == [2, 4, None]
    log = out["adapter_log"]
    assert any("SR166" in line and "speculative_num_draft_tokens" in line for line in log), log
    assert len(log) == len(set(log))  # the repeated config logs nothing new


def test_shadow_returns_sglangs_values_where_specreg_refuses_and_logs_it_once(runs, cases):
    """EAGLE, steps 3, topk 4, draft tokens 1: specreg refuses, SGLang resolves; in shadow mode
    SGLang's values and widths come back unchanged and the refusal is one SR166 line."""
    from specreg.adapters.common import outcome

    flags = {k: v for k, v in cases["refused"].items() if k != "device"}
    codes = outcome(Registry.load(), flags)["error"]
    assert codes == ["SR103"], codes
    alone = runs(None)["results"][5 + len(DFLASH_NS)]
    out = runs("shadow")
    first, again = out["results"][5 + len(DFLASH_NS): 7 + len(DFLASH_NS)]
    assert alone["error"] is None and first == again == alone
    lines = [line for line in out["adapter_log"] if "SR166" in line and "specreg reports" in line
             and "'speculative_num_draft_tokens': 1" in line]
    assert len(lines) == 1 and all(code in lines[0] for code in codes), out["adapter_log"]


def test_sglangs_rules_and_the_standalone_copy_agree_on_every_grid_case(runs, grid_cases):
    """Inside SGLang the adapter asks SGLang's own functions for its defaults and the HiSparse
    target rule (specreg.adapters.sglang_rules); the CLI keeps specreg's standalone copy. Both
    answer alike on every parity-grid case, through the (algorithm, target) pair it depends on."""
    answers = {tuple(a["key"]): a for a in runs(None)["probes"]}
    assert set(answers) == {rule_key(case) for case in grid_cases}
    for case in grid_cases:
        answer = answers[rule_key(case)]
        assert answer["sglang"] == answer["standalone"], (case["flags"], answer)
    targets = {answer["sglang"]["hisparse_target"] for answer in answers.values()}
    defaults = {tuple(answer["sglang"]["defaults"]) for answer in answers.values()}
    assert targets == {True, False} and defaults == {(5, 4, 8), (3, 1, 4)}  # both branches asked
    print(f"rules: {len(grid_cases)} grid cases, {len(answers)} (algorithm, target) pairs")


def test_a_mistyped_mode_stops_every_launch_with_the_coded_error(runs):
    """SPECREG_SGLANG=enforced: SGLang's loader catches what a plugin raises and goes on, so the
    adapter installs itself with SR176 and its resolution step raises it: no ServerArgs, with or
    without speculative flags, resolves silently without specreg."""
    out = runs("enforced")
    assert any("SR176" in line for line in out["adapter_log"]), out["adapter_log"]
    for result in out["results"]:
        assert result["error"] == "ConfigError" and result["is_value_error"], result
        assert "SR176" in result["message"] and "enforced" in result["message"]


@pytest.fixture(scope="module")
def launch(framework_env, model_dirs, tmp_path_factory):
    """`launch(tp_size, child_plan)`: SGLang's own launcher started with SPECREG_SGLANG=enforce
    and a tree EAGLE config (see sglang_launch.py for what is patched and why)."""
    import json
    import subprocess

    flags = {"model_path": str(model_dirs["llama"]), "device": "cuda",
             "speculative_algorithm": "EAGLE", "speculative_num_steps": 2, "speculative_eagle_topk": 4}

    def run(tp_size: int, child_plan: str = "") -> dict:
        reports = tmp_path_factory.mktemp("launch")
        result = subprocess.run(
            [str(framework_env.python), str(HERE / "sglang_launch.py"), str(reports), str(tp_size)],
            input=json.dumps({**flags, "tp_size": tp_size}), capture_output=True, text=True,
            timeout=600, env=framework_env.subprocess_env(
                SPECREG_SGLANG="enforce", SPECREG_TEST_CHILD_PLAN=child_plan),
        )
        out = json.loads((reports / "launcher.json").read_text())
        if result.returncode == 0:
            out = json.loads(result.stdout.strip().splitlines()[-1])
        else:  # SGLang's launcher killed its own process tree: the launch stopped
            out["outcome"] = f"stopped (exit {result.returncode})"
        found = [json.loads(path.read_text()) for path in reports.glob("child-*.json")]
        out["children"] = {child["tp_rank"]: child for child in found}
        return out

    return run


def test_sglangs_launcher_hands_the_plan_to_each_scheduler_process_and_each_checks_it(launch):
    """One launch through SGLang's launcher with three TP ranks: each scheduler process loads the
    plugin in SGLang's run_scheduler_process, resolves its own plan from the arguments it
    received and checks it against the launcher's fingerprint. Rank 0 agrees and sizes by the
    plan; rank 1 sees an altered published plan (SR165); rank 2 none at all, which in enforce
    mode is an error (SR180), not a silent pass. SGLang then stops the launch (SIGQUIT to the
    launcher, which kills its process tree)."""
    import json

    out = launch(3, child_plan="1:tamper,2:drop")
    assert out["outcome"] == "stopped (exit -9)", out  # SIGQUIT, then SGLang's SIGKILL of the tree
    children = out["children"]
    assert sorted(children) == [0, 1, 2]
    assert len({child["pid"] for child in children.values()} | {out["launcher_pid"]}) == 4
    agreeing = children[0]
    assert agreeing["error"] is None, agreeing
    published = json.loads(agreeing["published"])  # inherited from the launcher, which wrote it
    assert published["pid"] == out["launcher_pid"]
    plan = Registry.load().resolve({"algorithm": "eagle", "num_steps": 2, "topk": 4})
    assert published["fingerprint"]["widths"] == plan.fingerprint()["widths"]
    for worker in ("target", "draft"):
        for phase, width in agreeing["widths"][worker].items():
            assert width == plan.num_tokens_per_req(phase, worker == "draft")
    assert children[1]["error"] == "ConsistencyError" and "[SR165]" in children[1]["message"]
    assert "gamma\": 99" in children[1]["message"]  # it compared with what it was handed
    assert children[2]["error"] == "ConsistencyError" and "[SR180]" in children[2]["message"]
    assert children[2]["published"] is None and "load_plugins()" in children[2]["message"]
