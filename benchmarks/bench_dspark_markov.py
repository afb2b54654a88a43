"""Fused greedy Markov step vs the two-step reference, on the CPU (torch).

The two-step reference materialises the bias [b, V] (W1[prev] @ W2^T) and then takes the argmax.
On the CPU there is no Triton: the "fused" column is the torch implementation of the fused
algorithm (`markov_greedy_step_chunked_torch`: walk W2 in vocab chunks with a running max and
argmax), not the Triton kernel; benchmarks/gpu/bench_dspark_gpu.py times the Triton kernel. The
"pruned" column is what `markov_greedy_step` runs on the CPU (`markov_greedy_step_pruned_torch`:
the exact scores of the tokens the bias bound ||W2[v]|| ||W1[prev]|| leaves in reach of the
maximum, W2's row norms computed in the call), with the share of vocabulary blocks it kept.

Floor: the step must read W2 (and the base logits) once; the CPU path's time as a multiple of
that read is printed per batch size, for a standalone call (the W2 row norms computed in it: one
read of W2) and for a step of the head's walk (the norms computed once per block of gamma
steps, not counted). The dense steps are bound by the b x rank x V matmul (one thread's float32
FMA rate); the pruned one by the passes over the base logits, as long as the bias bound
separates the tokens: base logits peaked against a small correction, as a trained drafter's
are. The last line is the case it cannot prune (`--wide`: weights 30x larger, the correction as
large as the base spread), where it takes the chunked algorithm.

Memory is the temporaries each path allocates, computed from the shapes (torch's CPU allocator
has no peak counter): two-step = bias + scores = 2 * b * V floats; fused = 2 * b * chunk floats.

    python benchmarks/bench_dspark_markov.py            # small: V 32k, rank 256, b 1 and 8
    python benchmarks/bench_dspark_markov.py --full     # the target sizes: V 128k, b 1..64
"""

from __future__ import annotations

import argparse
import functools
import statistics
import time

import torch
from floors import floor_line, interleaved_best, read_all, write_profile
from specreg_dspark.kernels.markov_greedy import markov_greedy_step
from specreg_dspark.kernels.markov_greedy.torch_impl import (
    PRUNE_BLOCK,
    markov_greedy_step_chunked_torch,
    markov_greedy_step_torch,
    w2_row_norms,
)


def kept_share(base, prev, w1, w2) -> float:
    """The share of vocabulary blocks the pruned step keeps (its first pass, recomputed)."""
    from specreg_dspark.kernels.markov_greedy.torch_impl import _block_max

    vocab = base.shape[1]
    width = min(PRUNE_BLOCK, max(16, vocab // 64), vocab)
    embed = w1[prev]
    scores = base + embed @ w2.T
    reach = embed.norm(dim=1)
    upper = _block_max(base, width) + reach[:, None] * _block_max(w2_row_norms(w2), width)
    return float((upper >= scores.max(-1).values[:, None]).float().mean())


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
    parser.add_argument("--wide", type=int, default=None,
                        help="also the batch size for the line with weights too wide to prune "
                        "(default: the largest batch)")
    parser.add_argument("--profile", action="store_true",
                        help="write the torch.profiler table of the CPU step at the largest batch")
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
          f"{'two-step tmp MiB':>17} {'fused tmp MiB':>14} {'mem x':>7} same "
          f"{'pruned ms':>10} {'kept blocks':>12} same")
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
        pruned = functools.partial(markov_greedy_step, base, prev, w1, w2, backend="torch")
        norms = w2_row_norms(w2)
        walk_step = functools.partial(markov_greedy_step, base, prev, w1, w2, backend="torch",
                                      w2_norms=norms)
        t_ref = _time(two_step, args.reps)
        t_fused = _time(chunked, args.reps)
        t_pruned = _time(pruned, args.reps)
        mem_ref = 2 * b * vocab * 4 / 2**20
        mem_fused = 2 * b * min(args.chunk, vocab) * 4 / 2**20
        print(f"{b:>4} {t_ref * 1e3:>12.2f} {t_fused * 1e3:>16.2f} {t_ref / t_fused:>8.2f} "
              f"{mem_ref:>17.2f} {mem_fused:>14.2f} {mem_ref / mem_fused:>7.1f} "
              f"{bool(torch.equal(ref, fused))} {t_pruned * 1e3:>10.2f} "
              f"{kept_share(base, prev, w1, w2):>11.2%} {bool(torch.equal(ref, pruned()))}")
        floors.append((b, pruned, walk_step, read_all(base, w2)))
    what = "read of W2 [V, rank] and the base logits [{b}, V]"
    for b, pruned, walk_step, floor in floors:  # the floor: one read of W2 and the base logits
        times = interleaved_best({"pruned": pruned, "walk": walk_step, "floor": floor}, args.reps)
        print(floor_line(f"DSpark fused Markov step (torch), b={b}", times["pruned"],
                         times["floor"], what.format(b=b)))
        print(floor_line(f"DSpark Markov step in the head's walk (torch), b={b}", times["walk"],
                         times["floor"], what.format(b=b) + "; W2 row norms once per block"))
    if args.profile:
        b, pruned = floors[-1][0], floors[-1][1]
        print(f"profile: {write_profile(f'DSpark fused Markov step (torch), b={b}', pruned)}")
    b = args.wide or batches[-1]
    base = torch.randn(b, vocab)
    prev = torch.randint(0, vocab, (b,))
    wide1, wide2 = w1 * 30, w2 * 30
    wide = functools.partial(markov_greedy_step, base, prev, wide1, wide2, backend="torch")
    assert torch.equal(wide(), markov_greedy_step_torch(base, prev, wide1, wide2))
    times = interleaved_best({"wide": wide, "floor": read_all(base, w2)}, args.reps)
    print(f"weights 30x: the pruned step keeps {kept_share(base, prev, wide1, wide2):.1%} of "
          "the blocks and takes the chunked algorithm")
    print(floor_line(f"DSpark fused Markov step (torch), b={b}, bias too wide to prune",
                     times["wide"], times["floor"], what.format(b=b)))


if __name__ == "__main__":
    main()
