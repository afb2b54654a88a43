"""The filter alone on CPU: per-row statistics (top-k / top-p / min-p thresholds, kept mass)
of gathered rows against the floor of the bytes it must read, and against what a user would run.

    python benchmarks/bench_filter.py                 # 64 rows of V 32768, one thread
    python benchmarks/bench_filter.py --rows 16 --v 4096

For each parameter set, from one run (min of --repeats, thread CPU time):
- `stats`: `filtering.gathered_row_stats` (the torch path) over `--rows` rows gathered from a
  [8 * rows, V] logits tensor (what the params verify runs per position);
- `floor`: one read of the same rows (gathered, then `amax`): every token's score must be read;
- `softmax`: `softmax(rows / T)` of the same gathered rows, the work of verifying without
  parameters;
- `sorted`: the sort-based filter a user would write (sort, cumsum, scatter back).
It also prints the passes over the row of the Triton threshold search (emulated in numpy with
the kernel's key arithmetic) against the 32 of a bisection.
"""

from __future__ import annotations

import argparse
import time

import numpy as np
import torch
from floors import floor_line

from specreg.kernels.filtering import gathered_row_stats


def _min_time(fn, repeats: int) -> float:
    fn()
    best = float("inf")
    for _ in range(repeats):
        start = time.thread_time()
        fn()
        best = min(best, time.thread_time() - start)
    return best


def _sorted_filter(rows: torch.Tensor, top_k: int, top_p: float) -> torch.Tensor:
    values, order = rows.sort(-1, descending=True)
    if top_k:
        values[:, top_k:] = float("-inf")
    probs = values.softmax(-1)
    values = values.masked_fill(probs.cumsum(-1) - probs >= top_p, float("-inf"))
    return torch.empty_like(values).scatter_(1, order, values.softmax(-1))


def _key(z: np.ndarray) -> np.ndarray:
    bits = (z + np.float32(0)).view(np.int32).astype(np.int64)
    return np.where(bits < 0, bits ^ 0x7FFFFFFF, bits)


def triton_search_passes(z: np.ndarray, goal: float, mass: bool) -> int:
    """Passes of `filtering.triton_impl._bisect` over one row (numpy emulation)."""
    keys, shift = _key(z), z.max()
    weight = np.exp((z - shift).astype(np.float32))
    lo, hi, passes = -(2**31), int(_key(np.float32(shift))), 0
    while lo < hi:
        passes += 1
        mid = lo + (hi - lo + 1) // 2
        hit = keys >= mid
        total = weight[hit].sum(dtype=np.float32) if mass else hit.sum()
        if total >= goal:
            lo = min(max(int(keys[hit].min()), mid), hi) if hit.any() else mid
        else:
            below = int(keys[~hit].max()) if (~hit).any() else lo
            hi = max(min(below, mid - 1), lo)
    return passes


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--rows", type=int, default=64)
    parser.add_argument("--v", type=int, default=32768)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    gen = torch.Generator().manual_seed(0)
    flat = 4.0 * torch.randn(8 * args.rows, args.v, generator=gen)
    index = torch.arange(0, 8 * args.rows, 8)
    r = args.rows
    print(f"CPU, {torch.get_num_threads()} threads; {r} rows of V={args.v} gathered from "
          f"{8 * r}; min of {args.repeats}")  # fmt: skip
    floor = _min_time(lambda: flat.index_select(0, index).amax(-1), args.repeats)
    softmax = _min_time(lambda: torch.softmax(flat.index_select(0, index) / 0.8, -1), args.repeats)
    sets = {"top_p 0.9": (0, 0.9, 0.0), "top_k 50": (50, 1.0, 0.0),
            "top_k 50, top_p 0.9, min_p 0.05": (50, 0.9, 0.05), "temperature only": (0, 1.0, 0.0)}  # fmt: skip
    for name, (k, p, m) in sets.items():
        params = (torch.full((r,), 0.8), torch.full((r,), k), torch.full((r,), p), torch.full((r,), m))
        stats = _min_time(lambda params=params: gathered_row_stats(
            flat, index, *params, probabilities=False), args.repeats)  # fmt: skip
        sort = _min_time(lambda k=k, p=p: _sorted_filter(flat.index_select(0, index) / 0.8, k, p), 1)
        print(floor_line(f"filter statistics, {name}", stats, floor,
                         f"one read of the {r} gathered rows"))  # fmt: skip
        print(f"  {name}: stats {stats * 1e3:.2f} ms, softmax(rows / T) {softmax * 1e3:.2f} ms "
              f"(x{stats / softmax:.2f}), sort-based filter {sort * 1e3:.1f} ms (x{stats / sort:.3f})")
    rows = (flat[index[:8]] / 0.8).numpy()
    top_k = [triton_search_passes(z, 50, False) for z in rows]
    top_p = [triton_search_passes(z, 0.9 * float(np.exp(z - z.max()).sum(dtype=np.float32)), True)
             for z in rows]  # fmt: skip
    print(f"Triton threshold search, passes over the row (mean of 8 rows): top-k 50 "
          f"{np.mean(top_k):.1f}, top-p 0.9 {np.mean(top_p):.1f} (a bisection: 32 each)")


if __name__ == "__main__":
    main()
