"""The floor of a benchmark's work, timed in the same run as the kernel, and its printed line.

The floor is one read of the bytes the kernel must read (a torch reduction over that many
rows of the same tensor) or one `index_copy_` of the rows it must copy. Kernel and floor are
timed interleaved, call after call, and each keeps its fastest call, so a change in machine
load hits both. Every benchmark prints its floors as

    FLOOR <name>: kernel <ms> ms, floor <ms> ms (<what the floor is>) -> <multiple>x the floor

which `run_cpu.py` collects into the results and the benchmarks page.
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

#: What `floor_line` prints, for the scripts that collect the lines (run_cpu.py, gpu/run_all.py).
FLOOR_LINE = re.compile(
    r"^FLOOR (?P<name>.+?): kernel (?P<kernel>[\d.]+) ms, floor (?P<floor>[\d.]+) ms "
    r"\((?P<what>.*)\) -> (?P<multiple>[\d.]+)x the floor$",
    flags=re.MULTILINE,
)


def interleaved_best(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Seconds of the fastest call of each function, calling them in turn `repeats` times."""
    for fn in fns.values():  # warm: first-call allocations and caches
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            start = time.perf_counter()
            fn()
            best[name] = min(best[name], time.perf_counter() - start)
    return best


def read_rows(tensor: torch.Tensor, rows: int) -> Callable[[], object]:
    """One read of `rows` rows of the last dim of `tensor` (contiguous block, same dtype)."""
    flat = tensor.reshape(-1, tensor.shape[-1])
    block = flat[: max(1, min(rows, flat.shape[0]))]
    return lambda: block.sum()


def read_all(*tensors: torch.Tensor) -> Callable[[], object]:
    """One read of every element of each tensor."""
    return lambda: [t.sum() for t in tensors]


def floor_line(name: str, kernel_s: float, floor_s: float, what: str) -> str:
    return (f"FLOOR {name}: kernel {kernel_s * 1e3:.3f} ms, floor {floor_s * 1e3:.3f} ms "
            f"({what}) -> {kernel_s / floor_s:.2f}x the floor")  # fmt: skip
