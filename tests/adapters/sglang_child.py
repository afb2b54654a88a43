"""Plays an SGLang launcher or one of its scheduler/worker processes, for the plan hand-off test.

Runs inside the pinned framework environment with SPECREG_SGLANG set. `launcher`: resolves the
ServerArgs from stdin, pickles them (as SGLang does for its children) and prints the plan
fingerprint the adapter published. `child`: loads plugins as a fresh SGLang process does,
publishes the unpickled arguments and asks SGLang's width function, which makes the adapter
resolve this process's plan and compare it with SPECREG_SGLANG_PLAN.
"""

from __future__ import annotations

import json
import logging
import os
import pickle
import sys


def main() -> None:
    role, path = sys.argv[1], sys.argv[2]
    logging.disable(logging.CRITICAL)
    from sglang.srt.plugins import load_plugins

    load_plugins()
    from sglang.srt.runtime_context import get_context
    from sglang.srt.server_args import ServerArgs
    from sglang.srt.speculative import spec_utils
    from sglang.srt.speculative.spec_info import SpeculativeAlgorithm

    if role == "launcher":
        server_args = ServerArgs(**json.load(sys.stdin))
        server_args.resolve_once()
        with open(path, "wb") as handle:
            pickle.dump(server_args, handle)
        out = {"plan": os.environ.get("SPECREG_SGLANG_PLAN")}
    else:
        with open(path, "rb") as handle:
            server_args = pickle.load(handle)
        get_context().set_server_args(server_args)
        try:
            width = spec_utils.resolve_num_tokens_per_req(
                phase="target_verify", spec_algorithm=SpeculativeAlgorithm.from_string("EAGLE"))
            out = {"error": None, "width": width}
        except Exception as exc:  # noqa: BLE001 - the failure is the observation
            out = {"error": type(exc).__name__, "message": str(exc)}
    sys.stdout.write("\n" + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
