"""Loads SGLang's plugins the way its launcher does and reports what the adapter changed, as JSON.

Runs inside the pinned framework environment; the test sets SPECREG_SGLANG. Cases come on stdin.
Per case: the resolved steps, topk and draft tokens, every phase's width on both workers, and
the draft worker's verify width asked with `num_draft_tokens` given (2 and n), as SGLang's model
runner asks it; or the exception raised.
"""

from __future__ import annotations

import json
import logging
import sys
from importlib.metadata import entry_points


def main() -> None:
    cases = json.load(sys.stdin)
    logging.getLogger().setLevel(logging.CRITICAL)
    adapter_log: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: adapter_log.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("specreg.adapters").addHandler(handler)
    logging.getLogger("specreg.adapters").setLevel(logging.WARNING)
    import torch

    torch.cuda.get_device_capability = lambda *_a, **_k: (9, 0)
    from sglang.srt.plugins import load_plugins

    load_plugins()
    from sglang.srt.arg_groups.overrides import resolved_view
    from sglang.srt.runtime_context import get_context
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative import spec_utils
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    found = sorted(ep.value for ep in entry_points(group="sglang.srt.plugins"))
    results = []
    for kwargs in cases:
        try:
            server_args = ServerArgs(**kwargs)
            server_args.resolve_once()
        except BaseException as exc:  # noqa: BLE001 - the failure is the observation
            results.append({"error": type(exc).__name__, "is_value_error": isinstance(exc, ValueError),
                            "message": str(exc)})
            continue
        view = resolved_view(server_args)
        get_context().set_server_args(server_args)
        algo = SpeculativeAlgorithm.from_string(view.speculative_algorithm)
        widths = {
            worker: {phase: spec_utils.resolve_num_tokens_per_req(
                phase=phase, spec_algorithm=algo, is_draft_worker=worker == "draft")
                for phase in ("draft_decode", "draft_extend", "target_verify")}
            for worker in ("target", "draft")
        }
        # as SGLang's model runner asks for the draft worker's verify width, with n given
        at_n = {str(n): spec_utils.resolve_num_tokens_per_req(
            phase="target_verify", spec_algorithm=algo, is_draft_worker=True, num_draft_tokens=n)
            for n in (2, view.speculative_num_draft_tokens) if n is not None}
        results.append({"error": None, "values": [view.speculative_num_steps, view.speculative_eagle_topk,
                                                   view.speculative_num_draft_tokens], "widths": widths,
                        "draft_verify_at": at_n})
    sys.stdout.write("\n" + json.dumps({"entry_points": found, "results": results, "adapter_log": adapter_log}) + "\n")


if __name__ == "__main__":
    main()
