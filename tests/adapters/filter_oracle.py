"""Kept token sets of the frameworks' own top-k / top-p / min-p code, run inside the pinned env.

Reads JSON from stdin: {"framework": "vllm" | "sglang", "batches": [{"logits": [[...]],
"temperature": [...], "top_k": [...] (0 = off), "top_p": [...], "min_p": [...]}]} and prints
{"kept": [[[token, ...] per row] per batch], "code": {...}}: the tokens with positive
probability after the framework's own filtering, in the order its sampler applies it.

- vLLM 0.33.0 (`vllm.v1.sample.sampler.Sampler.sample`): `Sampler.apply_temperature`, then the
  argmax-invariant logits processors (the built-in `MinPLogitsProcessor`, fed through its own
  `update_state`), then `topk_topp_sampler.apply_top_k_top_p` on its torch branch
  (`HAS_TRITON = False`, as on a machine without Triton), then softmax.
- SGLang 0.5.23 (`sglang.srt.layers.sampler.Sampler.forward`, sampling backend "pytorch"):
  logits divided by the temperatures, `sampler_softmax`, then
  `top_k_top_p_min_p_sampling_from_probs_torch(..., return_filtered_probs=True)`; off values
  as SGLang's `SamplingBatchInfo` holds them (top_k TOP_K_ALL, top_p 1, min_p 0).
"""

from __future__ import annotations

import json
import sys
from types import SimpleNamespace

import torch


def vllm_kept(batch: dict) -> list[list[int]]:
    import vllm
    from vllm.v1.sample.logits_processor.builtin import MinPLogitsProcessor
    from vllm.v1.sample.logits_processor.interface import BatchUpdate
    from vllm.v1.sample.ops import topk_topp_sampler
    from vllm.v1.sample.sampler import Sampler

    topk_topp_sampler.HAS_TRITON = False
    logits = torch.tensor(batch["logits"], dtype=torch.float32)
    rows, vocab = logits.shape
    params = [
        vllm.SamplingParams(temperature=t, top_k=k, top_p=p, min_p=m)
        for t, k, p, m in zip(batch["temperature"], batch["top_k"], batch["top_p"],
                              batch["min_p"], strict=True)
    ]
    logits = Sampler.apply_temperature(
        logits, torch.tensor(batch["temperature"], dtype=torch.float32), all_random=True
    )
    config = SimpleNamespace(scheduler_config=SimpleNamespace(max_num_seqs=rows))
    min_p = MinPLogitsProcessor(config, torch.device("cpu"), False)
    added = [(i, sp, None, []) for i, sp in enumerate(params)]
    min_p.update_state(BatchUpdate(batch_size=rows, removed=[], added=added, moved=[]))
    logits = min_p.apply(logits)
    # vLLM's InputBatch: top_k off is the vocab size; k / p are None when no request uses them.
    k = torch.tensor([sp.top_k if sp.top_k > 0 else vocab for sp in params], dtype=torch.int32)
    p = torch.tensor([sp.top_p for sp in params], dtype=torch.float32)
    use_k = bool((k < vocab).any())
    use_p = bool((p < 1).any())
    logits = topk_topp_sampler.apply_top_k_top_p(
        logits, k if use_k else None, p if use_p else None
    )
    probs = logits.softmax(dim=-1, dtype=torch.float32)
    return [row.nonzero().flatten().tolist() for row in probs > 0]


def sglang_kept(batch: dict) -> list[list[int]]:
    from sglang.srt.layers import sampler
    from sglang.srt.sampling.sampling_params import TOP_K_ALL

    logits = torch.tensor(batch["logits"], dtype=torch.float32)
    temperatures = torch.tensor(batch["temperature"], dtype=torch.float32).view(-1, 1)
    logits.div_(temperatures)
    probs = sampler.sampler_softmax(logits)
    top_ks = torch.tensor([k if k > 0 else TOP_K_ALL for k in batch["top_k"]], dtype=torch.int32)
    top_ps = torch.tensor(batch["top_p"], dtype=torch.float32)
    min_ps = torch.tensor(batch["min_p"], dtype=torch.float32)
    need_min_p = bool((min_ps > 0).any())
    _, filtered, token_ids, _ = sampler.top_k_top_p_min_p_sampling_from_probs_torch(
        probs, top_ks, top_ps, min_ps, need_min_p, None,
        torch.zeros(probs.shape[0], dtype=torch.int64), return_filtered_probs=True,
    )
    kept = []
    for weights, ids in zip(filtered, token_ids, strict=True):
        kept.append(sorted(ids[weights > 0].tolist()))
    return kept


def main() -> None:
    payload = json.load(sys.stdin)
    run = {"vllm": vllm_kept, "sglang": sglang_kept}[payload["framework"]]
    torch.manual_seed(0)  # SGLang's function also draws a multinomial sample; not compared
    print(json.dumps({"kept": [run(batch) for batch in payload["batches"]]}))


if __name__ == "__main__":
    main()
