"""EAGLE Triton kernels vs the torch path on CUDA, with achieved GB/s against the device's peak.

    python benchmarks/gpu/bench_eagle_gpu.py [--batches 64 128 256] [--vocab 128256] [--peak-gbs 4800]

Bytes counted per call: greedy = logits read once (b*N*V*elem) + small tensors; sampling = the
rows the walk actually reads (root row sums plus, per request, the final residual's two passes
over one p row, and with q the q rows) estimated as (2 + depth) rows of p (and q) per request.
Target: >= 70 % of HBM bandwidth for the verifies at b >= 64.
"""

from __future__ import annotations

import argparse

import torch
from gpu_timing import cuda_time_ms, floor_at_peak
from specreg_eagle.kernels.select_topk import organize_draft_results, select_top_k_tokens
from specreg.kernels.tree_build.torch_impl import build_tree_torch
from specreg.kernels.tree_build.triton_impl import build_tree_triton
from specreg.kernels.tree_build.types import TreeBuildInputs
from specreg.kernels.tree_verify_greedy.torch_impl import verify_tree_greedy_torch
from specreg.kernels.tree_verify_greedy.triton_impl import verify_tree_greedy_triton
from specreg.kernels.tree_coins import caller_tree_coins
from specreg.kernels.tree_verify_sampling.torch_impl import verify_tree_sampling_torch
from specreg.kernels.tree_verify_sampling.triton_impl import verify_tree_sampling_triton
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs

from specreg.kernels.argmax import row_argmax_triton

PEAKS_GBS = {"H200": 4800.0, "H100": 3350.0, "A100": 2039.0}


def timed(fn, iters=20):
    """Median device time in seconds."""
    return cuda_time_ms(fn, iters, warmup=1) / 1e3


def make(b, k, s, n, v, dev):
    gen = torch.Generator(device=dev).manual_seed(0)
    hidden = torch.randn(b, 8, device=dev)
    tp, ti = torch.softmax(torch.randn(b, v, device=dev, generator=gen), -1).topk(k, -1)
    scores, lists = None, ([], [], [])
    for i in range(s):
        _, hidden, scores, info = select_top_k_tokens(i, tp, ti, hidden, scores, k)
        for lst, item in zip(lists, info, strict=True):
            lst.append(item)
        tp, ti = torch.softmax(torch.randn(b * k, 64, device=dev, generator=gen), -1).topk(k, -1)
    return organize_draft_results(*lists, n)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--batches", type=int, nargs="+", default=[64, 128, 256])
    ap.add_argument("--vocab", type=int, default=128256)
    ap.add_argument("--topk", type=int, default=4)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--peak-gbs", type=float, default=None)
    a = ap.parse_args()
    dev = torch.device("cuda")
    name = torch.cuda.get_device_name()
    peak = a.peak_gbs or next((g for key, g in PEAKS_GBS.items() if key in name), 3350.0)
    print(f"{name}: peak {peak:.0f} GB/s, topk={a.topk} steps={a.steps} N={a.n} V={a.vocab}")
    for b in a.batches:
        bench_batch(b, a.topk, a.steps, a.n, a.vocab, peak, dev)


def bench_batch(b, k, s, n, v, peak, dev):
    parent_list, sel, drafts = make(b, k, s, n, v, dev)
    bonus = torch.randint(0, v, (b,), device=dev)
    seq = torch.randint(100, 2000, (b,), device=dev)
    seq_sum = int(seq.sum())
    kw = dict(topk=k, depth=s, num_verify_tokens=n, mask_mode="full", seq_lens_sum=seq_sum)
    inputs = TreeBuildInputs(bonus, parent_list, sel, drafts, seq, **kw)
    t_tri = timed(lambda: build_tree_triton(inputs))
    t_tor = timed(lambda: build_tree_torch(inputs))
    ref, got = build_tree_torch(inputs), build_tree_triton(inputs)
    assert torch.equal(ref.tree_mask, got.tree_mask) and torch.equal(ref.positions, got.positions)
    print(f"b={b:4d} build_tree   triton {t_tri * 1e6:8.1f} us  torch {t_tor * 1e6:8.1f} us")

    tree = ref
    cand = tree.draft_tokens.view(b, n)
    links = (cand, tree.retrieve_index, tree.retrieve_next_token, tree.retrieve_next_sibling)
    logits = torch.randn(b, n, v, device=dev, dtype=torch.bfloat16)
    t_tri = timed(lambda: verify_tree_greedy_triton(*links, row_argmax_triton(logits, block_v=1024), depth=s))
    t_tor = timed(lambda: verify_tree_greedy_torch(*links, logits.argmax(-1), depth=s))
    gbs = logits.numel() * logits.element_size() / t_tri / 1e9
    print(f"b={b:4d} greedy       triton {t_tri * 1e6:8.1f} us  torch {t_tor * 1e6:8.1f} us  "
          f"{gbs:7.0f} GB/s = {100 * gbs / peak:5.1f}% of peak")
    print(floor_at_peak(f"EAGLE tree greedy verify (Triton) b={b}", t_tri,
                        logits.numel() * logits.element_size(), peak, "read"))  # fmt: skip

    probs = torch.softmax(logits.float(), -1)
    q = torch.softmax(torch.randn(b, n, v, device=dev), -1)
    coins = torch.rand(b, n, device=dev)
    keys = torch.randint(-(2**63), 2**63 - 1, (b,), device=dev)
    positions = torch.randint(0, 4096, (b,), device=dev)
    for label, draft in (("target-only", None), ("with q", q)):
        inputs = TreeSamplingInputs(*links, probs, draft, *caller_tree_coins(coins), keys,
                                    positions, depth=s)
        t_tri = timed(lambda i=inputs: verify_tree_sampling_triton(i))
        t_tor = timed(lambda i=inputs: verify_tree_sampling_torch(i))
        rows = (2 + s) * (1 if draft is None else 2) + (0 if draft is None else 2 * n)
        gbs = b * rows * v * 4 / t_tri / 1e9
        print(f"b={b:4d} sampling {label:11s} triton {t_tri * 1e6:8.1f} us  torch "
              f"{t_tor * 1e6:8.1f} us  {gbs:7.0f} GB/s = {100 * gbs / peak:5.1f}% of peak")
        print(floor_at_peak(f"EAGLE tree sampling verify {label} (Triton) b={b}", t_tri,
                            b * rows * v * 4, peak, "read"))  # fmt: skip


if __name__ == "__main__":  # pragma: no cover
    main()
