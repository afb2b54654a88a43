"""Starts SGLang's own launcher (`Engine._launch_subprocesses`) on CPU until its scheduler
processes have loaded the plugins and asked for their widths; prints what each reported, as JSON.

Runs inside the pinned framework environment with SPECREG_SGLANG set; ServerArgs keywords come on
stdin, the folder for the children's reports is argv[1], the number of children argv[2]. SGLang itself resolves and checks the
arguments, publishes them, allocates the ports and spawns one scheduler process per TP rank
(spawn start method) running SGLang's `run_scheduler_process`, which loads the plugins and
publishes the arguments in the child. Patched, because they cannot run here:

- `Scheduler` (in each child): it loads the model onto a GPU. Its stand-in asks SGLang's width
  function for every phase, as the model runner does when it sizes its buffers, writes what it
  got to the report folder and hands SGLang's pipe the init info; its event loop returns.
- the tokenizer manager and the detokenizer process: they need the model's tokenizer, which the
  tiny test checkpoints do not have. The tokenizer stand-in waits for the children's reports.

`SPECREG_TEST_CHILD_PLAN` (read by the child entry, test-only), e.g. `1:tamper,2:drop`: in the
child of that TP rank, `drop` removes and `tamper` alters the plan the launcher published, the
negative controls of the fingerprint check. A
child that raises makes SGLang's `run_scheduler_process` send the launcher SIGQUIT, and SGLang's
launcher then kills its process tree, as in a real launch: the launcher prints nothing, and the
test reads `launcher.json` and the children's reports from the folder. A failing child waits
until every rank has reported before it raises, so the reports do not depend on which ran first.
"""

from __future__ import annotations

import json
import logging
import os
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

PHASES = ("draft_decode", "draft_extend", "target_verify")
WAIT_S = 240


class LaunchReached(Exception):
    """Every scheduler process reported: the launch went as far as this test needs."""


class CPUScheduler:
    """Stands in for SGLang's Scheduler, whose construction loads the model onto a GPU."""

    def __init__(self, server_args: Any, port_args: Any) -> None:
        from sglang.srt.runtime_context import get_context
        from sglang.srt.speculative import spec_utils
        from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

        report: dict[str, Any] = {"pid": os.getpid(), "published": os.environ.get("SPECREG_SGLANG_PLAN")}
        try:
            algo = SpeculativeAlgorithm.from_string(get_context().server_args.speculative_algorithm)
            report["widths"] = {
                worker: {p: spec_utils.resolve_num_tokens_per_req(
                    phase=p, spec_algorithm=algo, is_draft_worker=worker == "draft") for p in PHASES}
                for worker in ("target", "draft")
            }
            report["error"] = None
        except BaseException as exc:
            report.update(error=type(exc).__name__, message=str(exc)[:2000])
            _write(report)
            # SGLang's launcher kills the whole process tree on the first failing child; wait
            # until every rank has reported, so the outcome does not depend on which ran first
            _wait_for_reports(Path(os.environ["SPECREG_TEST_REPORTS"]),
                              int(os.environ["SPECREG_TEST_CHILDREN"]))
            raise
        _write(report)
        self.metrics_reporter = SimpleNamespace(_shutdown_fpm=lambda: None)
        self.async_d2h_worker = None
        self.gracefully_exit = False

    def get_init_info(self) -> dict[str, Any]:
        return {"status": "ready", "max_total_num_tokens": 1, "max_req_input_len": 1}

    def run_event_loop(self) -> None:
        return None


def _write(report: dict[str, Any]) -> None:
    rank = os.environ["SPECREG_TEST_RANK"]
    report["tp_rank"] = int(rank)
    out = Path(os.environ["SPECREG_TEST_REPORTS"]) / f"child-{rank}.json"
    out.write_text(json.dumps(report))


def _wait_for_reports(reports: Path, expected: int) -> None:
    deadline = time.monotonic() + WAIT_S
    while len(list(reports.glob("child-*.json"))) < expected and time.monotonic() < deadline:
        time.sleep(0.2)


def scheduler_entry(*args: Any, **kwargs: Any) -> Any:
    """The child's target: SGLang's run_scheduler_process with only the GPU-bound Scheduler patched."""
    import sglang.srt.managers.scheduler as scheduler

    tp_rank = args[3]  # run_scheduler_process(server_args, port_args, gpu_id, tp_rank, ...)
    os.environ["SPECREG_TEST_RANK"] = str(tp_rank)
    changes = dict(item.split(":") for item in os.environ.get("SPECREG_TEST_CHILD_PLAN", "").split(",") if item)
    change = changes.get(str(tp_rank))
    if change == "drop":
        os.environ.pop("SPECREG_SGLANG_PLAN", None)
    elif change == "tamper":
        published = json.loads(os.environ["SPECREG_SGLANG_PLAN"])
        published["fingerprint"]["gamma"] = 99
        os.environ["SPECREG_SGLANG_PLAN"] = json.dumps(published)
    scheduler.Scheduler = CPUScheduler
    return scheduler.run_scheduler_process(*args, **kwargs)


def detokenizer_entry(*args: Any, **kwargs: Any) -> None:
    """The detokenizer process needs the tokenizer; it has nothing to do with the plan."""


def main() -> None:
    import multiprocessing as mp

    reports, expected = Path(sys.argv[1]), int(sys.argv[2])
    os.environ["SPECREG_TEST_REPORTS"] = str(reports)
    os.environ["SPECREG_TEST_CHILDREN"] = str(expected)
    logging.disable(logging.CRITICAL)
    mp.set_start_method("spawn", force=True)
    from sglang.srt.entrypoints.engine import Engine
    from sglang.srt.plugins import load_plugins
    from sglang.srt.server_args import ServerArgs

    load_plugins()  # as SGLang's CLI entry does before it builds ServerArgs

    def tokenizer_stand_in(server_args: Any, port_args: Any) -> Any:
        _wait_for_reports(reports, expected)
        time.sleep(1)  # a failing child's SIGQUIT, if any, lands here
        raise LaunchReached()

    out: dict[str, Any] = {"launcher_pid": os.getpid()}
    try:
        server_args = ServerArgs(**json.load(sys.stdin))
        (reports / "launcher.json").write_text(json.dumps(out))  # before a child can stop us
        Engine._launch_subprocesses(
            server_args, init_tokenizer_manager_func=tokenizer_stand_in,
            run_scheduler_process_func=scheduler_entry, run_detokenizer_process_func=detokenizer_entry,
        )
        out["outcome"] = "returned"
    except LaunchReached:
        out["outcome"] = "children reported"
    except BaseException as exc:  # noqa: BLE001 - the failure is the observation
        out.update(outcome="launcher failed", error=type(exc).__name__, message=str(exc)[:2000])
    out["launcher_plan"] = out.get("launcher_plan") or os.environ.get("SPECREG_SGLANG_PLAN")
    out["children"] = [json.loads(p.read_text()) for p in sorted(reports.glob("child-*.json"))]
    sys.stdout.write("\n" + json.dumps(out) + "\n")
    sys.stdout.flush()
    os._exit(0)  # the children die with their parent (SGLang sets that up in each)


if __name__ == "__main__":
    main()
