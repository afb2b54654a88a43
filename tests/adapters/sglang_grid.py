"""Resolves a grid of speculative flag sets through the real SGLang and prints the outcomes as JSON.

Runs inside the pinned framework environment (tests/adapters/envs.py), one process for the
whole grid: cases come as a JSON list on stdin, one result per case goes to stdout (with
`--runs`, one child process per adapter mode after one SGLang import: one_import.py). Each result
holds SGLang's resolved steps, topk and draft tokens and its width for every phase on both
workers, or the exception SGLang raised (type and message). Standard library and SGLang only.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys
from typing import Any

PHASES = ("draft_decode", "draft_extend", "target_verify")
FIELDS = ("speculative_num_steps", "speculative_eagle_topk", "speculative_num_draft_tokens")


def _patch_cuda_capability() -> None:
    # The DSA path asks for the GPU generation; there is none on this machine.
    import torch

    torch.cuda.get_device_capability = lambda *_a, **_k: (9, 0)


def _server_args(case: dict[str, Any]) -> Any:
    from sglang.srt.server_args import ServerArgs

    return ServerArgs(**case["kwargs"])


def _widths(server_args: Any, algorithm: str) -> dict[str, dict[str, Any]]:
    from sglang.srt.runtime_context import get_context
    from sglang.srt.speculative import spec_utils
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    get_context().set_server_args(server_args)
    algo = SpeculativeAlgorithm.from_string(algorithm)
    out: dict[str, dict[str, Any]] = {}
    for worker, is_draft in (("target", False), ("draft", True)):
        out[worker] = {}
        for phase in PHASES:
            try:
                out[worker][phase] = spec_utils.resolve_num_tokens_per_req(
                    phase=phase, spec_algorithm=algo, is_draft_worker=is_draft
                )
            except Exception as exc:  # noqa: BLE001 - the failure is the observation
                out[worker][phase] = f"{type(exc).__name__}: {exc}"
    return out


def evaluate(case: dict[str, Any]) -> dict[str, Any]:
    from sglang.srt.arg_groups.overrides import resolved_view

    try:
        server_args = _server_args(case)
        server_args.resolve_once()
        if case.get("check"):
            server_args.check_server_args()
    except BaseException as exc:  # noqa: BLE001 - AssertionError and TypeError are observations
        return {"id": case["id"], "error": type(exc).__name__, "refusal": isinstance(exc, ValueError),
                "message": str(exc)[:2000]}
    view = resolved_view(server_args)
    values = {name: getattr(view, name) for name in FIELDS}
    result: dict[str, Any] = {"id": case["id"], "error": None, "values": values}
    result["algorithm"] = view.speculative_algorithm
    result["widths"] = _widths(server_args, view.speculative_algorithm)
    return result


def preload() -> None:
    """What every run imports (one_import.py): torch and SGLang's modules, no plugin."""
    import sglang  # noqa: F401
    import sglang.srt.arg_groups.overrides  # noqa: F401
    import sglang.srt.plugins  # noqa: F401
    import sglang.srt.runtime_context  # noqa: F401
    import sglang.srt.server_args  # noqa: F401
    import sglang.srt.speculative.spec_info  # noqa: F401
    import sglang.srt.speculative.spec_utils  # noqa: F401
    import torch  # noqa: F401


def run(cases: list[dict[str, Any]]) -> dict[str, Any]:
    logging.disable(logging.CRITICAL)
    _patch_cuda_capability()
    if "--load-plugins" in sys.argv:  # as SGLang's launcher does, so SPECREG_SGLANG takes effect
        from sglang.srt.plugins import load_plugins

        load_plugins()
    results = []
    for case in cases:
        with contextlib.redirect_stdout(io.StringIO()):
            results.append(evaluate(case))
    import sglang

    return {"version": sglang.__version__, "results": results}


def main() -> None:
    if "--runs" in sys.argv:  # several runs (modes) in one process (one_import.py)
        import one_import

        one_import.main(preload, run)
        return
    out = run(json.load(sys.stdin))
    sys.stdout.write("\n" + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
