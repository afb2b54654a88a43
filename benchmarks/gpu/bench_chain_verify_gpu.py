"""Chain verification on CUDA: Triton kernels vs the torch path, and achieved bandwidth.

    python benchmarks/gpu/bench_chain_verify_gpu.py              # b = 64, 128, 256; V = 128k; n = 8
    python benchmarks/gpu/bench_chain_verify_gpu.py --b 64 --v 131072 --peak-gbs 4800

For each batch size it times (CUDA events, median of --repeats after warm-up):
- greedy: bf16 logits [b, n, V]; every draft equals the target argmax, so the kernel reads all n
  rows (the worst case). Bytes counted: b * n * V * 2.
- sampling: fp32 p [b, n, V] and q [b, n-1, V], fixed coins. Bytes counted: what the Triton kernel
  must read for the outcome observed: per request, two passes over p's emitting row, plus two over
  q's row when a draft was rejected (gathers are negligible).
It reports GB/s against a measured device-to-device copy bandwidth (torch copy of a 2 GiB tensor,
read + write bytes) and against the nominal peak (--peak-gbs, H200 HBM3e: 4800).
Fails with a clear message when CUDA is not available.
"""

from __future__ import annotations

import argparse
import functools
import sys

import torch
from gpu_timing import cuda_time_ms, floor_at_peak


def require_cuda() -> None:
    if not torch.cuda.is_available():
        sys.exit("bench_chain_verify_gpu.py needs a CUDA device (torch.cuda.is_available() is False)")
    try:
        import triton  # noqa: F401
    except ImportError:
        sys.exit("bench_chain_verify_gpu.py needs triton (pip install 'specreg[triton]')")


def cuda_time(fn, repeats: int, warmup: int = 3) -> float:
    """Median device time in seconds."""
    return cuda_time_ms(fn, repeats, warmup) / 1e3


def copy_bandwidth(repeats: int) -> float:
    src = torch.empty(2**29, dtype=torch.float32, device="cuda")  # 2 GiB
    dst = torch.empty_like(src)
    seconds = cuda_time(lambda: dst.copy_(src), repeats)
    return 2 * src.numel() * 4 / seconds / 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--b", type=int, nargs="+", default=[64, 128, 256])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--v", type=int, default=131072)
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--peak-gbs", type=float, default=4800.0, help="nominal HBM bandwidth")
    args = parser.parse_args()
    require_cuda()

    copy_gbs = copy_bandwidth(args.repeats)
    print(f"{torch.cuda.get_device_name()}: measured copy {copy_gbs:.0f} GB/s, "
          f"nominal peak {args.peak_gbs:.0f} GB/s; n={args.n} V={args.v}")
    for b in args.b:
        bench_greedy(b, args, copy_gbs)
        bench_sampling(b, args, copy_gbs)


def time_backends(verify, *tensors, repeats: int, **kwargs) -> dict[str, tuple[float, object]]:
    results = {}
    for backend in ("triton", "torch"):
        run = functools.partial(verify, *tensors, backend=backend, **kwargs)
        results[backend] = (cuda_time(run, repeats), run())
    return results


def report(name: str, b: int, results, nbytes: int, copy_gbs: float, peak: float, extra: str):
    t_tri, t_torch = results["triton"][0], results["torch"][0]
    gbs = nbytes / t_tri / 1e9
    print(f"b={b:4d} {name:8s} triton {t_tri * 1e6:9.1f} us  torch {t_torch * 1e6:9.1f} us  "
          f"x{t_torch / t_tri:5.2f}  {gbs:7.0f} GB/s = {gbs / copy_gbs:5.1%} of copy, "
          f"{gbs / peak:5.1%} of peak  {extra}")
    print(floor_at_peak(f"chain {name} verify (Triton) b={b}", t_tri, nbytes, peak, "read"))


def bench_greedy(b: int, args: argparse.Namespace, copy_gbs: float) -> None:
    from specreg.kernels.chain import verify_chain_greedy

    n, vocab = args.n, args.v
    gen = torch.Generator(device="cuda").manual_seed(b)
    logits = torch.randn(b, n, vocab, device="cuda", generator=gen).to(torch.bfloat16)
    predict = logits.argmax(-1)
    candidates = torch.cat([predict[:, :1], predict[:, :-1]], dim=1)  # every draft accepted
    results = time_backends(verify_chain_greedy, candidates, logits, repeats=args.repeats)
    assert torch.equal(results["triton"][1].output_tokens, results["torch"][1].output_tokens)
    report("greedy", b, results, b * n * vocab * 2, copy_gbs, args.peak_gbs, "(all accepted)")


def bench_sampling(b: int, args: argparse.Namespace, copy_gbs: float) -> None:
    from specreg.kernels.chain import verify_chain_sampling

    n, vocab = args.n, args.v
    gen = torch.Generator(device="cuda").manual_seed(b)
    p = torch.softmax(4 * torch.randn(b, n, vocab, device="cuda", generator=gen), -1)
    q = torch.softmax(4 * torch.randn(b, n - 1, vocab, device="cuda", generator=gen), -1)
    q = 0.5 * q + 0.5 * p[:, :-1]  # drafts often acceptable
    drafts = torch.multinomial(q.reshape(-1, vocab), 1, generator=gen).view(b, n - 1)
    candidates = torch.cat([p[:, 0].argmax(-1, keepdim=True), drafts], dim=1)
    coins = torch.rand(b, n - 1, device="cuda", generator=gen)
    keys = torch.randint(-(2**63), 2**63 - 1, (b,), device="cuda", generator=gen)
    positions = torch.randint(0, 4096, (b,), device="cuda", generator=gen)
    results = time_backends(
        verify_chain_sampling, candidates, p, q, repeats=args.repeats,
        coins=coins, keys=keys, positions=positions,
    )
    same = (results["triton"][1].output_tokens == results["torch"][1].output_tokens).all(1)
    accept = results["triton"][1].accept_len.to(torch.int64)
    rejected = int((accept < n - 1).sum())
    nbytes = 2 * vocab * 4 * (b + rejected)
    extra = f"(mean accepted {accept.float().mean():.2f}, identical rows {int(same.sum())}/{b})"
    report("sampling", b, results, nbytes, copy_gbs, args.peak_gbs, extra)

if __name__ == "__main__":
    main()
