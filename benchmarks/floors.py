"""The floor of a benchmark's work, timed in the same run as the kernel, and its printed line.

The floor is one read of the bytes the kernel must read (a torch reduction over that many
rows of the same tensor) or one `index_copy_` of the rows it must copy. Kernel and floor are
timed interleaved, call after call, and each keeps its fastest call, so a change in machine
load hits both. With one torch thread the clock is the thread's CPU time (`time.thread_time`):
on a machine shared with other jobs, a long kernel call is far likelier to be preempted than a
short read, and wall time would charge that to the kernel. Every benchmark prints its floors as

    FLOOR <name>: kernel <ms> ms, floor <ms> ms (<what the floor is>) -> <multiple>x the floor

which `run_cpu.py` collects into the results and the benchmarks page. A comparison with a
framework's own code for the same job (`bench_peers.py`) prints

    PEER <name>: specreg <ms> ms, <peer> <ms> ms (<what was timed>) -> <ratio>x the peer
    PEER <name>: absent (<why the peer could not run>)
    BOUND <name>: <what bounds specreg's time, from a profile> (only where the ratio is > 1)
"""

from __future__ import annotations

import re
import time
from collections.abc import Callable
from pathlib import Path
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    import torch

#: What `floor_line` prints, for the scripts that collect the lines (run_cpu.py, gpu/run_all.py).
FLOOR_LINE = re.compile(
    r"^FLOOR (?P<name>.+?): kernel (?P<kernel>[\d.]+) ms, floor (?P<floor>[\d.]+) ms "
    r"\((?P<what>.*)\) -> (?P<multiple>[\d.]+)x the floor$",
    flags=re.MULTILINE,
)

#: What `bench_traffic.py` prints per Triton kernel: interpreter-counted bytes against the rule's.
TRAFFIC_LINE = re.compile(
    r"^TRAFFIC (?P<name>.+?): loaded (?P<loaded>\d+) B, distinct (?P<distinct>\d+) B, "
    r"must read (?P<rule>\d+) B -> (?P<multiple>[\d.]+)x the rule, (?P<reuse>[\d.]+)x distinct$",
    flags=re.MULTILINE,
)


#: What `peer_line` prints: specreg's time over a framework's own code for the same job, on the
#: same inputs in the same process (target <= 1.0), or why the peer could not run.
PEER_LINE = re.compile(
    r"^PEER (?P<name>.+?): (?:specreg (?P<ours>[\d.]+) ms, (?P<peer>.+?) (?P<theirs>[\d.]+) ms "
    r"\((?P<what>.*)\) -> (?P<ratio>[\d.]+)x the peer|absent \((?P<absent>.*)\))$",
    flags=re.MULTILINE,
)
#: What a peer script prints under a ratio above 1: what bounds specreg's time there.
BOUND_LINE = re.compile(r"^BOUND (?P<name>.+?): (?P<bound>.+)$", flags=re.MULTILINE)


def peer_line(name: str, ours_s: float, peer: str, theirs_s: float, what: str) -> str:
    return (f"PEER {name}: specreg {ours_s * 1e3:.3f} ms, {peer} {theirs_s * 1e3:.3f} ms "
            f"({what}) -> {ours_s / theirs_s:.2f}x the peer")  # fmt: skip


def absent_line(name: str, why: str) -> str:
    """The line of a peer that could not run: reported, never skipped silently."""
    return f"PEER {name}: absent ({' '.join(why.split())})"


def clock() -> Callable[[], float]:
    """The thread's CPU time with one torch thread (preemption not counted), else wall time."""
    import torch

    return time.thread_time if torch.get_num_threads() == 1 else time.perf_counter


def interleaved_best(fns: dict[str, Callable[[], object]], repeats: int) -> dict[str, float]:
    """Seconds of the fastest call of each function, calling them in turn `repeats` times."""
    now = clock()
    for fn in fns.values():  # warm: first-call allocations and caches
        fn()
    best = dict.fromkeys(fns, float("inf"))
    for _ in range(repeats):
        for name, fn in fns.items():
            start = now()
            fn()
            best[name] = min(best[name], now() - start)
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


def print_greedy_floors(kernel: str, times: dict[str, float], what: str) -> None:
    """A greedy verify's lines: against the rows it must read (`times["reached"]`), against the
    whole logits (`times["all"]`), and torch.argmax + the same match (`times["argmax"]`)."""
    print(floor_line(f"{kernel} greedy verify", times["greedy"], times["reached"], what))
    print(floor_line(f"{kernel} greedy verify, whole logits", times["greedy"], times["all"],
                     "read of all the logits, logits.sum()"))  # fmt: skip
    print(floor_line(f"{kernel} greedy via torch.argmax", times["argmax"], times["reached"], what))


PROFILES = Path(__file__).resolve().parent / "results" / "profiles"


def write_profile(name: str, fn: Callable[[], object], calls: int = 5) -> Path:
    """torch.profiler table (CPU ops by self time) of `calls` calls of `fn`, written to
    benchmarks/results/profiles/<name>.txt: what bounds a kernel that misses its floor target."""
    import torch

    fn()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn()
    table = prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
    PROFILES.mkdir(parents=True, exist_ok=True)
    path = PROFILES / (re.sub(r"[^a-z0-9]+", "-", name.lower()).strip("-") + ".txt")
    path.write_text(f"{name}: torch.profiler, {calls} calls, torch {torch.__version__}, "
                    f"{torch.get_num_threads()} thread(s)\n{table}\n", encoding="utf-8")  # fmt: skip
    return path
