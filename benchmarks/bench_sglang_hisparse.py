"""SGLang's HiSparse swap path under `hisparse_swap`, against specreg's swapper called directly.

The substituted path is SGLang's own call site, ``HiSparseCoordinator.swap_in_selected_pages``
(what the DSA backend calls in target-verify), reaching specreg's manager, which reads SGLang's
tables, calls `HiSparseSwapper.swap` and writes the admitted tokens back. The direct path is the
same manager's swapper called with the same arguments. Calls alternate on one drifting workload
(each step replaces `--new-frac` of every request's selection with tokens never selected), so
both make the same decisions. Times are CPU time of one thread; the columns show each path's
fastest call, the ratio is the median over calls of the two paths' times on the same workload
step, timed back to back (so a load spike on a shared machine hits both of a pair).
The wrapping cost is substituted / direct - 1 (target <= 5 %). SGLang's own swap kernel is CUDA
compiled at run time and has no CPU path, so it is not in this table (benchmarks/gpu/
sglang_hisparse_compare.py compares against it on a GPU).

    python benchmarks/bench_sglang_hisparse.py          # bs 8, top_k 2048, buffer 4096, 1152-B rows
    python benchmarks/bench_sglang_hisparse.py --steps 4 8 --calls 40

Runs itself inside the pinned SGLang environment (tests/adapters/envs.py builds it once).
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def measure(args: argparse.Namespace) -> None:
    import torch

    from tests.adapters.sglang_hisparse_runtime import World, setup

    torch.set_num_threads(1)
    hc = setup("install")
    print(f"{'steps':>5} {'bs':>3} {'top_k':>5} {'substituted ms':>15} {'direct ms':>10} "
          f"{'misses/call':>11}  ratio")
    for steps in args.steps:
        paths = {name: SwapPath(hc, World, args, steps) for name in ("substituted", "direct")}
        times: dict[str, list[float]] = {"substituted": [], "direct": []}
        for call in range(args.calls + 2):
            order = list(paths.items())  # the same workload, call for call, the first of
            for name, path in order[:: 1 if call % 2 else -1]:  # each pair alternating
                top_k = path.drift()
                start = time.thread_time()
                path.call(top_k, substituted=name == "substituted")
                if call >= 2:  # the first calls fill the hot buffers
                    times[name].append(time.thread_time() - start)
        sub, direct = (min(times[k]) * 1e3 for k in ("substituted", "direct"))
        # the ratio: median over calls of substituted / direct for the same workload step,
        # timed back to back (a load spike hits both of a pair)
        ratio = statistics.median(a / b for a, b in zip(times["substituted"], times["direct"],
                                                         strict=True))
        misses = [int(p.manager.swapper.totals[1]) for p in paths.values()]
        assert misses[0] == misses[1], misses  # the same decisions on both paths
        print(f"{steps:>5} {args.bs:>3} {args.top_k:>5} {sub:>15.2f} {direct:>10.2f} "
              f"{misses[0] / (args.calls + 2):>11.0f}  substituted / direct = {ratio:.3f}x "
              f"(wrapping {100 * (ratio - 1):+.1f} %, target <= +5 %)")


class SwapPath:
    """One coordinator (SGLang's, with specreg's manager) and its requests' drifting selection."""

    def __init__(self, hc, world_class, args: argparse.Namespace, steps: int) -> None:
        import torch

        self.torch, self.args, self.steps = torch, args, steps
        self.gen = torch.Generator().manual_seed(steps)
        world = world_class(hc, ndt=steps, top_k=args.top_k, dbs=args.buffer, page=64,
                            slots=args.bs + 1, ctx=args.seq_len + 256, layers=1, mla=(512, 64))
        slots = [world.join(args.seq_len) for _ in range(args.bs)]
        self.c, self.manager = world.c, world.c.spec_swap
        for s in slots:  # the verify's extra page, as EAGLE's prepare leaves it
            world.reqs[s].kv.kv_allocated_len = args.seq_len + steps
        self.c.prepare_spec_verify(world.batch(slots))
        self.c.num_real_reqs.fill_(args.bs)
        self.req = torch.tensor(slots, dtype=torch.int64)
        self.seq = (args.seq_len + torch.arange(1, steps + 1)).repeat(args.bs).to(torch.int32)
        self.selection = torch.stack([torch.randperm(args.seq_len, generator=self.gen)[: args.top_k]
                                      for _ in slots])
        self.fresh = max(1, round(args.new_frac * args.top_k))

    def drift(self):
        torch, args = self.torch, self.args
        out = []
        for _ in range(self.steps):
            for b in range(args.bs):
                at = torch.randperm(args.top_k, generator=self.gen)[: self.fresh]
                self.selection[b, at] = torch.randint(0, args.seq_len, (self.fresh,),
                                                      generator=self.gen)
            out.append(self.selection.clone())
        return torch.stack(out, 1).to(torch.int32)

    def call(self, top_k, *, substituted: bool) -> None:
        c = self.c
        if substituted:  # SGLang's call site (the DSA backend's), reaching specreg's manager
            c.swap_in_selected_pages(self.req, self.seq, top_k, 0)
        else:  # specreg's swapper, called directly with the same arguments
            self.manager.swapper.swap(top_k, self.req, self.seq, c.num_real_reqs, layer=0,
                                      host_cache=c.mem_pool_host.kv_buffer[0],
                                      device_buffer=c.mem_pool_device.kv_buffer[0])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[4, 8])
    parser.add_argument("--bs", type=int, default=8)
    parser.add_argument("--top-k", type=int, default=2048)
    parser.add_argument("--buffer", type=int, default=4096, help="device_buffer_size (hot tokens)")
    parser.add_argument("--seq-len", type=int, default=12288)
    parser.add_argument("--new-frac", type=float, default=0.05)
    parser.add_argument("--calls", type=int, default=30, help="timed calls per path")
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args()
    if args.inside:
        measure(args)
        return
    sys.path.insert(0, str(ROOT))
    from tests.adapters.envs import ensure_env

    env = ensure_env()
    command = [str(env.python), str(Path(__file__).resolve()), "--inside", *sys.argv[1:]]
    extra = {"OMP_NUM_THREADS": "1"}
    if os.environ.get("SPECREG_KERNEL_BACKEND"):
        extra["SPECREG_KERNEL_BACKEND"] = os.environ["SPECREG_KERNEL_BACKEND"]
    done = subprocess.run(command, env=env.subprocess_env(**extra), cwd=ROOT, check=False)
    sys.exit(done.returncode)


if __name__ == "__main__":
    main()
