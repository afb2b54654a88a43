"""DSpark kernels on a GPU: the Triton fused greedy Markov step vs the torch two-step version.

Sizes from the issue: V = 128k, rank 256, batch 1..64, bf16 weights (fp32 accumulation).
For each batch: median time (CUDA events), speed ratio, peak extra memory
(torch.cuda.max_memory_allocated above the inputs), achieved bandwidth of the fused kernel
(W2 + base logits bytes / time, vs ~4.8 TB/s H200 HBM), and agreement with the reference:
exact index match rate, and that the fused pick's score equals the reference max within the
float32 accumulation-order tolerance (indices may differ only on near-ties).
Also checks the draft-block builder against torch.

    python benchmarks/gpu/bench_dspark_gpu.py [--vocab 131072] [--rank 256] [--batch 1 8 64]
"""

from __future__ import annotations

import argparse
import functools
import os

import torch
from gpu_timing import cuda_time_ms

os.environ.setdefault("SPECREG_KERNEL_BACKEND", "auto")

from specreg_dspark.kernels.draft_block.torch_impl import build_draft_block_torch  # noqa: E402
from specreg_dspark.kernels.draft_block.triton_impl import build_draft_block_triton  # noqa: E402
from specreg_dspark.kernels.markov_greedy.torch_impl import markov_greedy_step_torch  # noqa: E402
from specreg_dspark.kernels.markov_greedy.triton_impl import (  # noqa: E402
    markov_greedy_step_triton,
)


def _peak_mib(fn) -> float:
    torch.cuda.synchronize()
    torch.cuda.reset_peak_memory_stats()
    before = torch.cuda.memory_allocated()
    fn()
    torch.cuda.synchronize()
    return (torch.cuda.max_memory_allocated() - before) / 2**20


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--vocab", type=int, default=128 * 1024)
    parser.add_argument("--rank", type=int, default=256)
    parser.add_argument("--batch", type=int, nargs="*", default=[1, 2, 4, 8, 16, 32, 64])
    parser.add_argument("--block-v", type=int, nargs="*", default=[64, 128, 256])
    parser.add_argument("--reps", type=int, default=50)
    args = parser.parse_args()
    assert torch.cuda.is_available(), "this script needs a CUDA GPU"
    dev = torch.device("cuda")
    torch.manual_seed(0)
    vocab, rank = args.vocab, args.rank
    w1 = (torch.randn(vocab, rank, device=dev) * 0.05).to(torch.bfloat16)
    w2 = (torch.randn(vocab, rank, device=dev) * 0.05).to(torch.bfloat16)
    print(f"{torch.cuda.get_device_name()}  V={vocab} rank={rank} weights bf16")
    print(f"{'b':>3} {'blkV':>5} {'two-step us':>12} {'fused us':>9} {'speed x':>8} "
          f"{'two-step MiB':>13} {'fused MiB':>10} {'GB/s':>7} {'idx match':>9} score ok")
    for b in args.batch:
        base = torch.randn(b, vocab, device=dev, dtype=torch.bfloat16)
        prev = torch.randint(0, vocab, (b,), device=dev)
        ref = markov_greedy_step_torch(base, prev, w1, w2)
        scores = base.float() + w1[prev].float() @ w2.float().T
        two_step = functools.partial(markov_greedy_step_torch, base, prev, w1, w2)
        t_ref = cuda_time_ms(two_step, args.reps)
        m_ref = _peak_mib(two_step)
        for block_v in args.block_v:
            fused = functools.partial(
                markov_greedy_step_triton, base, prev, w1, w2, block_v=block_v
            )

            got = fused()
            t_fused = cuda_time_ms(fused, args.reps)
            m_fused = _peak_mib(fused)
            match = float((got == ref).float().mean())
            picked = scores.gather(1, got[:, None]).squeeze(1)
            best = scores.max(dim=1).values
            score_ok = bool(torch.allclose(picked, best, rtol=0, atol=1e-3 * best.abs().max().item()))
            gbps = (w2.numel() * 2 + base.numel() * 2) / (t_fused * 1e-3) / 1e9
            print(f"{b:>3} {block_v:>5} {t_ref * 1e3:>12.1f} {t_fused * 1e3:>9.1f} "
                  f"{t_ref / t_fused:>8.2f} {m_ref:>13.2f} {m_fused:>10.2f} {gbps:>7.0f} "
                  f"{match:>9.3f} {score_ok}")
    # draft-block builder
    anchor = torch.randint(0, vocab, (64,), device=dev)
    pos = torch.randint(0, 4096, (64,), device=dev)
    for width in (7, 8, 16):
        a = build_draft_block_torch(anchor, pos, width, vocab - 1)
        t = build_draft_block_triton(anchor, pos, width, vocab - 1)
        same = all(torch.equal(x, y) for x, y in zip(a, t, strict=True))
        t_ms = cuda_time_ms(lambda w=width: build_draft_block_triton(anchor, pos, w, vocab - 1), args.reps)
        print(f"draft block b=64 width={width}: triton == torch {same}, {t_ms * 1e3:.1f} us")


if __name__ == "__main__":
    main()
