"""vLLM's rejection sampler on CPU: the `rejection_sampler` substitution against specreg's chain
verifier called directly and against vLLM's own path, side by side in one run.

Runs inside the pinned vLLM environment (tests/adapters/envs.py builds it):

    ENV=$(python -c "from tests.adapters.envs import ensure_env; e = ensure_env(); \
print(e.python, ':'.join(map(str, e.import_path())))")
    set -- $ENV; CUDA_VISIBLE_DEVICES= TRITON_INTERPRET=1 SPECREG_VLLM=enforce \
        SPECREG_VLLM_SUBSTITUTE=rejection_sampler PYTHONPATH=$2 $1 \
        benchmarks/bench_vllm_rejection.py --b 32 --k 4 --v 32000

Paths timed on the same batch (b requests, k drafts each, vocabulary V, a sampled batch with
temperature, top-k, top-p and min-p, and a greedy one), each the fastest of `--repeats` calls
taken in turn:

- `direct`: `ChainVerifier.verify_from_logits` on inputs already in specreg's layout
  (candidates [b, k+1], scores [b, k+1, V], params, coins): the floor of the same work.
- `substituted`: the substitution's verification step, from vLLM's flat inputs (draft ids,
  target rows, bonus rows, SamplingMetadata) to vLLM's output_token_ids: `direct` plus the
  layout, params, coins and output conversion. Its excess over `direct` is the wrapping cost
  (issue #20: at most 5 %).
- `forward specreg`: `RejectionSampler.forward` through the substitution (vLLM's bonus sampler
  and logits processing included, as in vLLM's own forward).
- `forward vllm`: vLLM's own `RejectionSampler.forward`. On this CPU machine vLLM's Triton
  kernels run only under the Triton interpreter (its C++ CPU fallbacks are not in the CUDA
  wheel), so this is what a CPU user of this vLLM build gets, not vLLM's GPU speed; min-p is
  left out of vLLM's batch (vLLM refuses it with speculation).
"""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests" / "adapters"))
sys.path.insert(0, str(Path(__file__).resolve().parent))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--b", type=int, default=32)
    parser.add_argument("--k", type=int, default=4)
    parser.add_argument("--v", type=int, default=32000)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--vllm-repeats", type=int, default=1)
    parser.add_argument("--threads", type=int, default=1,
                        help="torch threads (1: a shared machine's busy cores stall OpenMP)")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    logging.disable(logging.CRITICAL)
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    import vllm_rejection_run as child  # the test's builders of vLLM's objects
    from floors import interleaved_best
    from vllm.v1.sample.ops import topk_topp_sampler

    import specreg.adapters.vllm_batch as sub
    from specreg.adapters.substitution_runtime import active

    assert active() == ("rejection_sampler",), "set SPECREG_VLLM=enforce and the switch"
    topk_topp_sampler.HAS_TRITON = False
    for module in list(sys.modules.values()):
        if getattr(module, "PIN_MEMORY", None) is True:
            module.PIN_MEMORY = False
    child.V = args.v
    b, k, vocab = args.b, args.k, args.v
    print(f"vLLM rejection sampler, b={b} k={k} V={vocab}, torch {torch.__version__}, "
          f"{torch.get_num_threads()} thread(s)")
    forward_specreg = child.sampler("specreg")
    forward_vllm = child.sampler("vllm")
    verifier = forward_specreg.verifier
    for layout_name, counts in (("every request k drafts (logits read in place)", [k] * b),
                                ("ragged: k or k-1 drafts (logits copied into the layout)",
                                 [k - (r % 2) for r in range(b)])):
        torch.manual_seed(0)
        logits = torch.randn(sum(counts) + b, vocab) * 4
        drafts, row = [], 0
        for r, c in enumerate(counts):
            d = logits[row : row + c].argmax(-1).tolist()
            if r % 4 == 0:
                d[c // 2] = (d[c // 2] + 1) % vocab  # a quarter of the requests reject midway
            drafts.append(d)
            row += c + 1
        meta = child.metadata_of(drafts)
        for name, requests in (("sampled: temperature, top-k, top-p, min-p",
                                [{"temperature": 0.8, "top_k": 50, "top_p": 0.9,
                                  "min_p": 0.05}] * b),
                               ("greedy", [{"temperature": 0.0}] * b)):
            sm = child.sampling_metadata_of(requests, drafts)
            layout = sub.ChainLayout.of(meta, logits.device)
            scores = sub.chain_scores(layout, logits, meta, None)
            candidates, lens = sub.chain_candidates(layout, meta.draft_token_ids)
            params = sub.request_params(sm, b, vocab, logits.device)
            coins, keys = sub.vllm_coins(layout, meta.num_draft_tokens, sm.generators,
                                         sm.all_greedy, logits.device)
            bonus_ids = logits[meta.bonus_logits_indices].argmax(-1, keepdim=True)

            def substituted(sm=sm, bonus_ids=bonus_ids, meta=meta, logits=logits):
                layout = forward_specreg.layout_of(meta, logits.device)  # as forward gets it
                scores = sub.chain_scores(layout, logits, meta, None)
                return sub.verify(verifier, meta, layout, scores, bonus_ids, sm)

            def direct(candidates=candidates, scores=scores, params=params, coins=coins,
                       keys=keys, lens=lens):
                return verifier.verify_from_logits(
                    candidates, scores, None, params=params, coins=coins, keys=keys,
                    verify_lens=lens)

            def forward(meta=meta, logits=logits, sm=sm):
                return forward_specreg(meta, None, logits.clone(), sm)

            paths = {"direct": direct, "substituted": substituted, "forward specreg": forward}
            best = interleaved_best(paths, args.repeats)
            plain = child.sampling_metadata_of(
                [{kk: v for kk, v in r.items() if kk != "min_p"} for r in requests], drafts)
            started = time.perf_counter()
            for _ in range(args.vllm_repeats):
                forward_vllm(meta, None, logits.clone(), plain)
            best["forward vllm (interpreter)"] = (
                (time.perf_counter() - started) / args.vllm_repeats)
            print(f"\n{layout_name}; {name}")
            for path, seconds in best.items():
                print(f"  {path:<28} {seconds * 1e3:10.2f} ms   x{seconds / best['direct']:8.3f}"
                      " direct")
            print(f"  wrapping cost (substituted / direct - 1): "
                  f"{100 * (best['substituted'] / best['direct'] - 1):+.1f} %")
            print(f"  forward: vLLM's own / substituted = "
                  f"{best['forward vllm (interpreter)'] / best['forward specreg']:.1f}x")


if __name__ == "__main__":
    main()
