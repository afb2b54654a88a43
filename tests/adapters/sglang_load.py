"""Loads SGLang's plugins the way its launcher does and reports what the adapter changed, as JSON.

Runs inside the pinned framework environment; the test sets SPECREG_SGLANG (with `--runs`,
one child process per mode after one SGLang import: one_import.py). Cases (ServerArgs
keywords) and rule probes come on stdin as {"cases": [...], "probes": [...]}. Per case: the resolved steps, topk and draft tokens, every phase's width on both workers, and
the draft worker's verify width asked with `num_draft_tokens` given (2 and n), as SGLang's model
runner asks it; or the exception raised. Per probe ({"key", "kwargs"}, one (algorithm, target)
pair): SGLang's `_auto_choose_speculative_params` and HiSparse target test against specreg's
standalone `model_defaults` and `DSA_ARCHITECTURES`.
"""

from __future__ import annotations

import json
import logging
import os
import sys
from importlib.metadata import entry_points


def probe_rules(probes: list[dict]) -> list[dict]:
    """SGLang's own rules (through specreg.adapters.sglang_rules) and specreg's standalone copy,
    asked the same questions: the EAGLE-family defaults and the HiSparse target test."""
    from sglang.srt.server_args import ServerArgs

    from specreg.adapters import sglang_rules
    from specreg.framework_args.model_config import architecture, read_model_config
    from specreg.framework_args.rules import DSA_ARCHITECTURES, model_defaults

    answers = []
    for probe in probes:
        server_args = ServerArgs(**probe["kwargs"])
        arch = architecture(read_model_config(probe["kwargs"]["model_path"], "--model-path")[0])
        answers.append({
            "key": probe["key"],
            "sglang": {"defaults": list(sglang_rules.auto_params(server_args)),
                       "hisparse_target": sglang_rules.hisparse_target(server_args)},
            "standalone": {"defaults": list(model_defaults(arch, probe["key"][0])),
                           "hisparse_target": arch in DSA_ARCHITECTURES},
        })
    return answers


def preload() -> None:
    """What every mode's run imports (one_import.py): torch and SGLang's modules, no plugin."""
    import sglang.srt.arg_groups.overrides  # noqa: F401
    import sglang.srt.plugins  # noqa: F401
    import sglang.srt.runtime_context  # noqa: F401
    import sglang.srt.server_args  # noqa: F401
    import sglang.srt.speculative.spec_info  # noqa: F401
    import sglang.srt.speculative.spec_utils  # noqa: F401
    import torch  # noqa: F401


def run(payload: dict) -> dict:
    cases, probes = payload["cases"], payload.get("probes", [])
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
    # the rules are asked with the adapter off only: its answers must be SGLang's alone
    asked = probe_rules(probes) if not os.environ.get("SPECREG_SGLANG") else []
    return {"entry_points": found, "results": results, "adapter_log": adapter_log, "probes": asked}


def main() -> None:
    if "--runs" in sys.argv:  # every mode's run in one process (one_import.py)
        import one_import

        one_import.main(preload, run)
        return
    out = run(json.load(sys.stdin))
    sys.stdout.write("\n" + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
