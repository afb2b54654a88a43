"""Timing helper shared by the GPU benchmark scripts (run them as `python benchmarks/gpu/X.py`)."""

from __future__ import annotations

import statistics
import sys
from collections.abc import Callable
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # benchmarks/: the FLOOR line format
from floors import floor_line  # noqa: E402


def cuda_time_ms(fn: Callable[[], object], reps: int = 20, warmup: int = 3) -> float:
    """Median device time of `fn` in milliseconds, measured with CUDA events."""
    for _ in range(warmup):
        fn()
    torch.cuda.synchronize()
    samples = []
    for _ in range(reps):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        fn()
        stop.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(stop))
    return statistics.median(samples)


def floor_at_peak(name: str, kernel_s: float, nbytes: int, peak_gbs: float, what: str) -> str:
    """The FLOOR line of a GPU kernel: its time against moving `nbytes` at `peak_gbs` (the
    multiple is 1 / the fraction of the peak reached)."""
    floor_s = nbytes / (peak_gbs * 1e9)
    share = floor_s / kernel_s
    return floor_line(name, kernel_s, floor_s, f"{nbytes / 1e6:.1f} MB {what} at {peak_gbs:.0f} GB/s; "
                      f"{share:.0%} of it")  # fmt: skip
