"""HiSparse swap on a GPU: the Triton path, its host-to-device bandwidth from pinned memory, and
its device-side time per call (CUDA events; no host syncs inside a call).

Measures, at the target sizes (bs 16, steps 4, top_k 2048, hot 4096, 656-byte rows, 5 % new
tokens per step):

1. pinned-copy peak: one large `cuda_tensor.copy_(pinned, non_blocking=True)` (the link's
   practical peak on this machine);
2. the Triton planned copy reading pinned host rows directly through UVA (a pinned CPU tensor
   passed to a Triton kernel: the launcher maps its data_ptr with cuPointerGetAttribute), as
   GB/s and % of the peak, for several CTA counts;
3. the batched-copy alternative: gather rows on the host into a pinned staging buffer, one
   async H2D copy, then one device-side scatter (`index_copy_`);
4. device time per swap call: resolve+plan+commit kernel alone, and the whole call (with IO);
5. correctness: the Triton (GPU) path makes the same decisions as the torch path (CPU).

    python benchmarks/gpu/bench_hisparse_gpu.py [--bs 16] [--steps 4] [--top-k 2048] [--hot 4096]
"""

from __future__ import annotations

import argparse
import copy
import os
import sys
from pathlib import Path

import torch
from gpu_timing import cuda_time_ms, floor_at_peak

os.environ.setdefault("SPECREG_KERNEL_BACKEND", "auto")
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_hisparse import Workload  # noqa: E402
from specreg_hisparse.kernels.planned_copy.triton_impl import copy_planned_triton  # noqa: E402
from specreg_hisparse.kernels.planned_copy.types import PlannedCopy  # noqa: E402
from specreg_hisparse.kernels.swap.triton_impl import swap_triton  # noqa: E402
from specreg_hisparse.kernels.swap.types import SwapCall  # noqa: E402
from specreg_hisparse.sizes import compute_layout  # noqa: E402
from specreg_hisparse.swapper import HiSparseSwapper  # noqa: E402


def _setup(layout, row_bytes, device):
    swapper = HiSparseSwapper(layout, device=device)
    host = swapper.new_host_cache(row_bytes)  # pinned when the swapper is on CUDA
    host.copy_(torch.randint(0, 255, host.shape, dtype=torch.uint8))
    dev = swapper.new_device_buffer(row_bytes)
    pos = torch.arange(layout.max_seq_len)
    for slot in range(layout.req_slots):
        req = torch.full_like(pos, slot)
        swapper.set_host_locs(req, pos, swapper.default_host_rows(req, pos))
    return swapper, host, dev


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--bs", type=int, default=16)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--top-k", type=int, default=2048)
    parser.add_argument("--hot", type=int, default=4096)
    parser.add_argument("--row-bytes", type=int, default=656)
    parser.add_argument("--new-frac", type=float, default=0.05)
    parser.add_argument("--calls", type=int, default=20)
    args = parser.parse_args()
    assert torch.cuda.is_available(), "this benchmark needs a CUDA device"
    cuda = torch.device("cuda")
    bs, steps = args.bs, args.steps
    n_new = max(1, round(args.new_frac * args.top_k))
    max_seq = args.top_k + n_new * steps * (3 * args.calls + 16) + 1
    layout, problems = compute_layout(args.top_k, args.hot, None, bs, steps, row_bytes=args.row_bytes,
                                      max_seq_len=max_seq, device="cuda")  # fmt: skip
    assert layout is not None, problems
    print(f"{torch.cuda.get_device_name()}: bs={bs} steps={steps} top_k={args.top_k} hot={args.hot} "
          f"row={args.row_bytes} B new/step={args.new_frac:.0%}")  # fmt: skip

    # 5. correctness first: GPU Triton vs CPU torch on the same calls
    gpu, host_g, dev_g = _setup(layout, args.row_bytes, cuda)
    cpu_layout = copy.copy(layout)
    cpu, host_c, dev_c = _setup(cpu_layout, args.row_bytes, torch.device("cpu"))
    host_c.copy_(host_g)
    work = Workload(bs, args.top_k, args.new_frac)
    req_c, seq_c = torch.arange(bs), torch.full((bs, steps), max_seq)
    req_g, seq_g = req_c.to(cuda), seq_c.to(cuda)
    num_real = torch.tensor([bs], dtype=torch.int32, device=cuda)
    for _ in range(4):
        tokens = work.call(steps)
        locs_c = cpu.swap(tokens, req_c, seq_c, bs, host_cache=host_c, device_buffer=dev_c)
        locs_g = gpu.swap(
            tokens.to(cuda), req_g, seq_g, num_real, host_cache=host_g, device_buffer=dev_g
        )
        assert torch.equal(locs_c, locs_g.cpu()), "Triton (GPU) and torch (CPU) decisions differ"
        ok = locs_g >= 0
        assert torch.equal(dev_g[locs_g[ok].long()].cpu(), dev_c[locs_c[ok.cpu()].long()])
    assert int(gpu.error_count) == 0
    print("correctness: Triton on GPU == torch on CPU for 4 calls (locations and device rows)")

    # 1. pinned-copy peak
    big = 256 << 20
    pinned = torch.empty(big, dtype=torch.uint8, pin_memory=True)
    target = torch.empty(big, dtype=torch.uint8, device=cuda)
    t_peak = cuda_time_ms(lambda: target.copy_(pinned, non_blocking=True))
    peak = big / t_peak / 1e6
    print(f"pinned H2D peak (one 256 MiB copy): {peak:.1f} GB/s")

    # 4. device time per call
    tokens_g = [work.call(steps).to(cuda) for _ in range(args.calls)]
    it = iter(tokens_g * 1000)
    t_call = cuda_time_ms(lambda: gpu.swap(next(it), req_g, seq_g, num_real, host_cache=host_g,
                                      device_buffer=dev_g), reps=args.calls)  # fmt: skip
    plan = gpu.last_plan
    misses = int(plan.miss_count.sum())
    nbytes = misses * args.row_bytes
    state_copy = copy.deepcopy(gpu.state)
    out = torch.empty_like(tokens_g[0])
    hits = torch.empty(bs, dtype=torch.int32, device=cuda)
    src, dst, cnt = plan.miss_src.clone(), plan.miss_dst.clone(), plan.miss_count.clone()
    last = tokens_g[-1]

    resolve_call = SwapCall(tokens=last, req=req_g, seq_lens=seq_g, num_real=num_real, layer=0,
                            state=state_copy, layout=layout, out=out, miss_src=src,
                            miss_dst=dst, miss_count=cnt, hits=hits)  # fmt: skip

    def resolve_only():
        swap_triton(resolve_call)

    t_resolve = cuda_time_ms(resolve_only)
    print(f"swap call (device time): whole {t_call * 1e3:.1f} us, resolve+plan+commit kernel "
          f"{t_resolve * 1e3:.1f} us; {misses} distinct misses = {nbytes / 1e6:.2f} MB per call")  # fmt: skip
    print(floor_at_peak("HiSparse swap call (GPU)", t_call / 1e3, nbytes, peak,
                        "of missed rows moved at the pinned-copy peak"))  # fmt: skip

    # 2. Triton planned copy through UVA, several CTA counts
    best_copy = float("inf")
    for chunks in (1, 4, 16, 64):
        t_copy = cuda_time_ms(lambda c=chunks: copy_planned_triton(PlannedCopy(
            miss_src=plan.miss_src, miss_dst=plan.miss_dst, miss_count=plan.miss_count,
            num_real=num_real, host_cache=host_g, device_buffer=dev_g), num_chunks=c))  # fmt: skip
        bw = nbytes / t_copy / 1e6
        print(f"Triton UVA planned copy, {bs}x{chunks} CTAs: {t_copy * 1e3:.1f} us, {bw:.1f} GB/s "
              f"({bw / peak:.0%} of pinned peak)")  # fmt: skip
        best_copy = min(best_copy, t_copy)
    print(floor_at_peak("HiSparse planned copy (Triton UVA, best CTA count)", best_copy / 1e3,
                        nbytes, peak, "of missed rows moved at the pinned-copy peak"))  # fmt: skip

    # 3. batched copies: host gather -> pinned staging -> one H2D copy -> device scatter
    cols = torch.arange(plan.miss_src.shape[1], device=cuda)
    keep = cols[None, :] < plan.miss_count[:, None].long()
    src_h = plan.miss_src[keep].cpu()
    dst_d = plan.miss_dst[keep].long()
    staging = torch.empty((src_h.numel(), args.row_bytes), dtype=torch.uint8, pin_memory=True)
    landing = torch.empty((src_h.numel(), args.row_bytes), dtype=torch.uint8, device=cuda)

    def batched():
        torch.index_select(host_g, 0, src_h, out=staging)
        landing.copy_(staging, non_blocking=True)
        dev_g.index_copy_(0, dst_d, landing)

    t_batched = cuda_time_ms(batched)
    bw = nbytes / t_batched / 1e6
    print(f"batched copy (host gather + one H2D + scatter): {t_batched * 1e3:.1f} us, {bw:.1f} GB/s "
          f"({bw / peak:.0%} of pinned peak; includes the host-side gather)")  # fmt: skip


if __name__ == "__main__":
    main()
