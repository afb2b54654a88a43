"""Asks SGLang's own rules (through `specreg.adapters.sglang_rules`) and specreg's standalone
copy the same questions for each case, and prints both answers as JSON.

Runs inside the pinned framework environment, without plugins. Cases come on stdin as
{"key", "kwargs"}: the ServerArgs keywords of one (algorithm, target model) pair. Per case:
SGLang's `_auto_choose_speculative_params` against specreg's `model_defaults`, and SGLang's
HiSparse target test against specreg's `DSA_ARCHITECTURES`.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import sys


def main() -> None:
    cases = json.load(sys.stdin)
    logging.disable(logging.CRITICAL)
    from sglang.srt.server_args import ServerArgs

    from specreg.adapters import sglang_rules
    from specreg.framework_args import (
        DSA_ARCHITECTURES,
        architecture,
        model_defaults,
        read_model_config,
    )

    results = []
    for case in cases:
        with contextlib.redirect_stdout(io.StringIO()):
            server_args = ServerArgs(**case["kwargs"])
            target, _ = read_model_config(case["kwargs"]["model_path"], "--model-path")
            arch = architecture(target)
            results.append({
                "key": case["key"],
                "sglang": {"defaults": list(sglang_rules.auto_params(server_args)),
                           "hisparse_target": sglang_rules.hisparse_target(server_args)},
                "standalone": {"defaults": list(model_defaults(arch)),
                               "hisparse_target": arch in DSA_ARCHITECTURES},
            })
    sys.stdout.write("\n" + json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
