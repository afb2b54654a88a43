"""Chain verification with per-request sampling parameters on CUDA: cost vs verifying without.

    python benchmarks/gpu/bench_sampling_params_gpu.py             # b = 64, 256; V = 32k, 256k
    python benchmarks/gpu/bench_sampling_params_gpu.py --b 64 --v 32768 --repeats 20

For each batch size, vocabulary and parameter set (temperature only; `mixed_demo_params`, a
sixth greedy; every filter at once) it times with CUDA events (median of --repeats):
- `params`: `verify_chain_with_params` on bf16 target logits [b, n, V] and draft logits
  [b, n-1, V] (Triton; filtering inside the kernel);
- `without`: `softmax(logits / T)` of target and draft in float32, then `verify_chain_sampling`
  (Triton): what a framework does without parameters;
and prints params / without, the peak extra device memory of the params call as a fraction of
its input bytes (torch.cuda.max_memory_allocated), and whether the Triton tokens equal the torch
path's on the same inputs (forced `backend="torch"`; a few differing rows are possible only at
float32 rounding ties of exp/sum between the two).
Fails with a clear message when CUDA is not available.
"""

from __future__ import annotations

import argparse
import sys

import torch
from gpu_timing import cuda_time_ms


def require_cuda() -> None:
    if not torch.cuda.is_available():
        sys.exit("bench_sampling_params_gpu.py needs a CUDA device "
                 "(torch.cuda.is_available() is False)")
    try:
        import triton  # noqa: F401
    except ImportError:
        sys.exit("bench_sampling_params_gpu.py needs triton (pip install 'specreg[triton]')")


def param_sets(b: int):
    from specreg.testing.demo_params import mixed_demo_params
    from specreg.contract.sampling_params import SamplingParams

    seeds = list(range(b))
    return {
        "temperature": SamplingParams.of(b, temperature=0.8, seed=seeds, device="cuda"),
        "mixed": mixed_demo_params(b, device="cuda"),
        "all_filters": SamplingParams.of(b, temperature=0.8, top_k=50, top_p=0.9, min_p=0.05,
                                         seed=seeds, device="cuda"),
    }


def inputs(b: int, n: int, vocab: int):
    gen = torch.Generator(device="cuda").manual_seed(b + vocab)
    target = (4 * torch.randn(b, n, vocab, device="cuda", generator=gen)).to(torch.bfloat16)
    draft = (target[:, : n - 1].float()
             + 2 * torch.randn(b, n - 1, vocab, device="cuda", generator=gen)).to(torch.bfloat16)
    candidates = torch.randint(0, vocab, (b, n), device="cuda", generator=gen)
    agree = torch.rand(b, n - 1, device="cuda", generator=gen) < 0.7
    candidates[:, 1:] = torch.where(agree, draft.float().argmax(-1), candidates[:, 1:])
    return candidates, target, draft


def bench(b: int, n: int, vocab: int, repeats: int) -> None:
    from specreg.kernels.chain import verify_chain_sampling
    from specreg.kernels.chain_params import verify_chain_with_params

    candidates, target, draft = inputs(b, n, vocab)
    input_bytes = target.numel() * 2 + draft.numel() * 2
    keys = torch.arange(b, device=candidates.device)  # one stream key per request
    for name, params in param_sets(b).items():
        temperature = torch.where(params.temperature > 0, params.temperature, 1.0)[:, None, None]

        def with_params(params=params):
            return verify_chain_with_params(candidates, target, draft, params=params)

        def without(temperature=temperature):
            p = torch.softmax(target.float() / temperature, -1)
            q = torch.softmax(draft.float() / temperature, -1)
            return verify_chain_sampling(candidates, p, q, keys=keys)

        t_params = cuda_time_ms(with_params, repeats)
        t_without = cuda_time_ms(without, repeats)
        torch.cuda.synchronize()
        torch.cuda.reset_peak_memory_stats()
        base = torch.cuda.memory_allocated()
        got = with_params()
        torch.cuda.synchronize()
        extra = (torch.cuda.max_memory_allocated() - base) / input_bytes
        ref = verify_chain_with_params(candidates, target, draft, params=params, backend="torch")
        same = int((got.output_tokens == ref.output_tokens).all(1).sum())
        accept = got.accept_len.float().mean()
        print(f"b={b:4d} V={vocab:6d} {name:12s} params {t_params * 1e3:8.1f} us  without "
              f"{t_without * 1e3:8.1f} us  x{t_params / t_without:5.2f}  peak extra memory "
              f"{extra:.3f}x of inputs  torch-equal rows {same}/{b}  accept {accept:.2f}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--b", type=int, nargs="+", default=[64, 256])
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--v", type=int, nargs="+", default=[32768, 262144])
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    require_cuda()
    print(f"{torch.cuda.get_device_name()}; n={args.n}")
    for vocab in args.v:
        for b in args.b:
            bench(b, args.n, vocab, args.repeats)


if __name__ == "__main__":
    main()
