"""Constructs SGLang's own HiSparseSpecSwapManager on CPU for (draft tokens, top_k) pairs.

Runs inside the pinned framework environment. The coordinator is the smallest object the
manager's constructor reads (layer count, request slots, device, top_k, buffer size); the
manager itself is SGLang's, unchanged. Prints, per pair, whether SGLang accepted it and its message.
"""

from __future__ import annotations

import json
import logging
import sys
from types import SimpleNamespace


def main() -> None:
    pairs = json.load(sys.stdin)
    logging.disable(logging.CRITICAL)
    import torch
    from sglang.srt.managers.hisparse_coordinator import HiSparseSpecSwapManager

    class Coordinator(SimpleNamespace):  # weak-referenceable, as the manager requires
        pass

    results = []
    for draft_tokens, top_k in pairs:
        coordinator = Coordinator(
            mem_pool_device=SimpleNamespace(layer_num=1),
            req_to_token_pool=SimpleNamespace(req_to_token=torch.zeros((2, 1), dtype=torch.int32)),
            device="cpu", top_k=top_k, device_buffer_size=4096, is_dsv4_hisparse=False,
        )
        try:
            HiSparseSpecSwapManager(coordinator, num_draft_tokens=draft_tokens)
            results.append({"accepted": True})
        except ValueError as exc:
            results.append({"accepted": False, "message": str(exc)})
    sys.stdout.write("\n" + json.dumps(results) + "\n")


if __name__ == "__main__":
    main()
