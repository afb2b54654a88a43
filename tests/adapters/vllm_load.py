"""Loads vLLM's plugins the way vLLM does, builds each case's SpeculativeConfig and, for
custom_class cases, constructs and calls the proposer as vLLM's model runner does; prints JSON.

Runs inside the pinned framework environment; the test sets SPECREG_VLLM (with `--runs`, one
child process per mode after one vLLM import: one_import.py). Cases come on stdin:
target model folder, speculative-config dict and, optionally, a `propose` batch. A plugin that
raises while vLLM loads it is recorded (`load_error`) and the cases still run, as a process that
caught the error would go on. Standard library, numpy and vLLM only.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
from typing import Any


def _error(exc: BaseException) -> dict[str, Any]:
    return {"error": type(exc).__name__, "message": str(exc)[:1500]}


def evaluate(case: dict[str, Any]) -> dict[str, Any]:
    from vllm.config import ParallelConfig
    from vllm.engine.arg_utils import EngineArgs

    try:
        engine_args = EngineArgs(model=case["target"], speculative_config=dict(case["spec"]),
                                 skip_tokenizer_init=True)
        model_config = engine_args.create_model_config()
        spec = engine_args.create_speculative_config(model_config, ParallelConfig())
    except BaseException as exc:  # noqa: BLE001 - the failure is the observation
        return {"id": case["id"], **_error(exc)}
    result: dict[str, Any] = {"id": case["id"], "error": None, "method": spec.method,
                              "k": spec.num_speculative_tokens,
                              "max_model_len": model_config.max_model_len}
    if "propose" in case:
        try:
            result["drafts"] = _propose(spec, model_config, case["propose"])
        except BaseException as exc:  # noqa: BLE001 - e.g. a proposer refused at construction
            result["propose_error"] = _error(exc)
    return result


def _propose(spec: Any, model_config: Any, batch: dict[str, Any]) -> list[list[int]]:
    import numpy as np
    from vllm.v1.spec_decode.custom_class_proposer import create_custom_proposer

    class _Config:  # the two attributes create_custom_proposer and the proposer read
        speculative_config = spec

    _Config.model_config = model_config
    proposer = create_custom_proposer(_Config())
    histories = batch["histories"]
    token_ids_cpu = np.zeros((len(histories), max(len(h) for h in histories) + 8), dtype=np.int32)
    for i, history in enumerate(histories):
        token_ids_cpu[i, : len(history)] = history
    num_tokens_no_spec = np.array([len(h) for h in histories], dtype=np.int32)
    return proposer.propose(batch["sampled"], num_tokens_no_spec, token_ids_cpu, slot_mappings=None)


def preload() -> None:
    """What every mode's run imports (one_import.py): numpy and vLLM's modules, no plugin."""
    import numpy  # noqa: F401
    import vllm  # noqa: F401
    import vllm.config  # noqa: F401
    import vllm.engine.arg_utils  # noqa: F401
    import vllm.plugins  # noqa: F401
    import vllm.v1.spec_decode.custom_class_proposer  # noqa: F401


def run(cases: list[dict[str, Any]]) -> dict[str, Any]:
    logging.disable(logging.CRITICAL)
    from vllm.plugins import load_general_plugins

    load_error = None
    try:
        load_general_plugins()
    except BaseException as exc:  # noqa: BLE001 - vLLM's loader lets a plugin's error through
        load_error = _error(exc)
    results = []
    for case in cases:
        with contextlib.redirect_stdout(io.StringIO()):
            results.append(evaluate(case))
    import vllm
    from vllm.engine.arg_utils import EngineArgs

    patched = bool(getattr(EngineArgs.create_speculative_config, "__specreg_adapter__", False))
    return {"version": vllm.__version__, "adapter_installed": patched, "load_error": load_error,
            "results": results}


def main() -> None:
    if "--runs" in sys.argv:  # every mode's run in one process (one_import.py)
        import one_import

        one_import.main(preload, run)
        return
    out = run(json.load(sys.stdin))
    sys.stdout.write("\n" + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
