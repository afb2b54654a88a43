"""Fused greedy Markov step vs the two-step reference, on the CPU (torch).

The two-step reference materialises the bias [b, V] (W1[prev] @ W2^T) and then takes the argmax.
On the CPU there is no Triton: the "fused" column is the torch implementation of the fused
algorithm (`markov_greedy_step_chunked_torch`: walk W2 in vocab chunks with a running max and
argmax), not the Triton kernel; benchmarks/gpu/bench_dspark_gpu.py times the Triton kernel.

Floor: the fused step must read W2 (and the base logits) once; its time as a multiple of that
read is printed per batch size (the matmul b x rank x V makes it compute-bound at large b).

Memory is the temporaries each path allocates, computed from the shapes (torch's CPU allocator
has no peak counter): two-step = bias + scores = 2 * b * V floats; fused = 2 * b * chunk floats.

    python benchmarks/bench_dspark_markov.py            # small: V 32k, rank 256, b 1 and 8
    python benchmarks/bench_dspark_markov.py --full     # the issue's sizes: V 128k, b 1..64
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import torch
from floors import floor_line, interleaved_best, read_all
from specreg_dspark.kernels.markov_greedy.torch_impl import (
    markov_greedy_step_chunked_torch,
    markov_greedy_step_torch,
)


def _time(fn, reps: int) -> float:
    fn()
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    parser.add_argument("--full", action="store_true", help="V 128k, batch 1..64")
    parser.add_argument("--vocab", type=int, default=None)
    parser.add_argument("--rank", type=int, default=256)
    parser.add_argument("--batch", type=int, nargs="*", default=None)
    parser.add_argument("--chunk", type=int, default=16384)
    parser.add_argument("--reps", type=int, default=5)
    parser.add_argument("--threads", type=int, default=None, help="torch intra-op threads")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    vocab = args.vocab or (128 * 1024 if args.full else 32 * 1024)
    batches = args.batch or ([1, 2, 4, 8, 16, 32, 64] if args.full else [1, 8])
    torch.manual_seed(0)
    w1 = torch.randn(vocab, args.rank) * 0.05
    w2 = torch.randn(vocab, args.rank) * 0.05
    print(f"V={vocab} rank={args.rank} chunk={args.chunk} threads={torch.get_num_threads()}")
    print(f"{'b':>4} {'two-step ms':>12} {'fused(torch) ms':>16} {'speed x':>8} "
          f"{'two-step tmp MiB':>17} {'fused tmp MiB':>14} {'mem x':>7} same")
    floors = []
    for b in batches:
        base = torch.randn(b, vocab)
        prev = torch.randint(0, vocab, (b,))
        ref = markov_greedy_step_torch(base, prev, w1, w2)
        fused = markov_greedy_step_chunked_torch(base, prev, w1, w2, chunk=args.chunk)
        two_step = functools.partial(markov_greedy_step_torch, base, prev, w1, w2)
        chunked = functools.partial(
            markov_greedy_step_chunked_torch, base, prev, w1, w2, chunk=args.chunk
        )
        t_ref = _time(two_step, args.reps)
        t_fused = _time(chunked, args.reps)
        mem_ref = 2 * b * vocab * 4 / 2**20
        mem_fused = 2 * b * min(args.chunk, vocab) * 4 / 2**20
        print(f"{b:>4} {t_ref * 1e3:>12.2f} {t_fused * 1e3:>16.2f} {t_ref / t_fused:>8.2f} "
              f"{mem_ref:>17.2f} {mem_fused:>14.2f} {mem_ref / mem_fused:>7.1f} "
              f"{bool(torch.equal(ref, fused))}")
        floors.append((b, t_fused, chunked, read_all(base, w2)))
    for b, _, chunked, floor in floors:  # the floor: one read of W2 and of the base logits
        times = interleaved_best({"fused": chunked, "floor": floor}, args.reps)
        print(floor_line(f"DSpark fused Markov step (torch), b={b}", times["fused"],
                         times["floor"], f"read of W2 [V, rank] and the base logits [{b}, V]"))  # fmt: skip


if __name__ == "__main__":
    main()
