"""HiSparse swap on the CPU (torch path): against a naive per-request Python reference, its copy
bandwidth against `index_copy_`, and one 4-step call against 4 single-step calls.

Workload: every request keeps a selection of top_k token positions; each verify step replaces
`--new-frac` of it with tokens never selected before (so a call of `steps` steps brings about
steps x new_frac x top_k distinct misses). All ratios are measured in this one run. The floor
of a swap call is one `index_copy_` of the rows it missed (host rows gathered with
index_select, as 16-byte words), timed right after each call (so from the caches the call just
filled), and once more after evicting the caches: the swap reads those rows cold.

    python benchmarks/bench_hisparse.py           # small: bs 4, top_k 512, hot 1024
    python benchmarks/bench_hisparse.py --full    # the issue's sizes: bs 16, steps 4,
                                                  # top_k 2048, hot 4096, 656-byte rows, 5 % new
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import torch
from floors import clock, floor_line, write_profile
from specreg_hisparse.kernels.planned_copy.torch_impl import (
    copy_planned_torch,
    planned_rows,
    row_words,
)
from specreg_hisparse.kernels.planned_copy.types import PlannedCopy
from specreg_hisparse.sizes import compute_layout
from specreg_hisparse.swapper import HiSparseSwapper

#: Bytes written between the floor copies to evict the CPU caches (above the L3 of the
#: benchmark machine, 32 MiB).
CACHE_BYTES = 64 << 20


def _median_time(fn, reps: int) -> float:
    samples = []
    for _ in range(reps):
        start = time.perf_counter()
        fn()
        samples.append(time.perf_counter() - start)
    return statistics.median(samples)


class Workload:
    """Per request: a top-k selection drifting by `new_frac` fresh tokens per step."""

    def __init__(self, bs: int, top_k: int, new_frac: float, seed: int = 0) -> None:
        self.gen = torch.Generator().manual_seed(seed)
        self.bs, self.top_k = bs, top_k
        self.n_new = max(1, round(new_frac * top_k))
        self.selection = torch.stack([torch.randperm(top_k, generator=self.gen) for _ in range(bs)])
        self.next_fresh = top_k

    def call(self, steps: int) -> torch.Tensor:
        out = []
        for _ in range(steps):
            for b in range(self.bs):
                idx = torch.randperm(self.top_k, generator=self.gen)[: self.n_new]
                self.selection[b, idx] = torch.arange(self.next_fresh, self.next_fresh + self.n_new)
            self.next_fresh += self.n_new
            out.append(self.selection.clone())
        return torch.stack(out, 1).int()  # [bs, steps, top_k]


def naive_swap(swapper, tokens, req, seq_lens, host, dev):
    """The same decisions as the swapper, one request and one token at a time in Python."""
    lay, state = swapper.layout, swapper.state
    tokens_l, seq_l, req_l = tokens.tolist(), seq_lens.tolist(), req.tolist()
    out = [[[-1] * tokens.shape[2] for _ in range(tokens.shape[1])] for _ in range(tokens.shape[0])]
    for b, r in enumerate(req_l):
        toks = state.slot_tokens[0, r].tolist()
        stamps = state.slot_stamp[0, r].tolist()
        rows = state.slot_rows[r].tolist()
        tail = state.tail_tokens[r].tolist()
        host_locs = state.host_cache_locs[r]
        where = {t: s for s, t in enumerate(toks) if t >= 0}
        hits, misses = set(), set()
        for s, step in enumerate(tokens_l[b]):
            for t in step:
                if t < 0 or t >= seq_l[b][s] or tail[t % lay.page_size] == t:
                    continue
                if t in where:
                    hits.add(where[t])
                else:
                    misses.add(t)
        victims = sorted((stamps[s], s) for s in range(lay.hot_size) if s not in hits)
        now = int(state.clock[0, r]) + 1
        miss_row = {}
        for i, t in enumerate(sorted(misses)):
            if i < len(victims):
                slot = victims[i][1]
                toks[slot], stamps[slot] = t, now
            else:
                slot = lay.scratch_start + i - len(victims)
            miss_row[t] = rows[slot]
            dev[rows[slot]] = host[int(host_locs[t])]
        for s in hits:
            stamps[s] = now
        for s, step in enumerate(tokens_l[b]):
            for k, t in enumerate(step):
                if t < 0 or t >= seq_l[b][s]:
                    continue
                if tail[t % lay.page_size] == t:
                    out[b][s][k] = rows[lay.hot_size + t % lay.page_size]
                else:
                    out[b][s][k] = rows[where[t]] if t in where else miss_row[t]
        state.slot_tokens[0, r] = torch.tensor(toks, dtype=torch.int32)
        state.slot_stamp[0, r] = torch.tensor(stamps)
        state.clock[0, r] = now
    return torch.tensor(out, dtype=torch.int32)


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawTextHelpFormatter
    )
    parser.add_argument("--full", action="store_true", help="the issue's sizes")
    parser.add_argument("--bs", type=int)
    parser.add_argument("--steps", type=int, default=4)
    parser.add_argument("--top-k", type=int)
    parser.add_argument("--hot", type=int)
    parser.add_argument("--row-bytes", type=int, default=656)
    parser.add_argument("--new-frac", type=float, default=0.05)
    parser.add_argument("--calls", type=int, default=8, help="timed calls per measurement")
    parser.add_argument(
        "--naive-calls", type=int, default=3, help="of those, how many also run the reference"
    )
    parser.add_argument(
        "--threads", type=int, default=1, help="torch CPU threads (1: stable on a shared machine)"
    )
    parser.add_argument("--profile", action="store_true",
                        help="write a torch.profiler table of the swap to results/profiles/")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    bs = args.bs or (16 if args.full else 4)
    top_k = args.top_k or (2048 if args.full else 512)
    hot = args.hot or (4096 if args.full else 1024)
    steps = args.steps
    n_new = max(1, round(args.new_frac * top_k))
    max_seq = top_k + n_new * steps * (2 * args.calls + 8) + 1
    layout, problems = compute_layout(top_k, hot, None, bs, steps, row_bytes=args.row_bytes,
                                      max_seq_len=max_seq)  # fmt: skip
    assert layout is not None, problems
    torch.manual_seed(0)
    base = HiSparseSwapper(layout)
    host = torch.randint(0, 255, (layout.host_rows, args.row_bytes), dtype=torch.uint8)
    dev = base.new_device_buffer(args.row_bytes)
    req = torch.arange(bs)
    pos = torch.arange(max_seq)
    for r in range(bs):
        slot = torch.full((max_seq,), r)
        base.set_host_locs(slot, pos, base.default_host_rows(slot, pos))
    seq = torch.full((bs, steps), max_seq)
    work = Workload(bs, top_k, args.new_frac)
    base.swap(work.call(steps), req, seq, host_cache=host, device_buffer=dev)  # warm: fill
    print(f"bs={bs} steps={steps} top_k={top_k} hot={hot} row={args.row_bytes} B "
          f"new/step={args.new_frac:.0%}; torch {torch.__version__}, {torch.get_num_threads()} threads")  # fmt: skip

    # 1. torch path vs naive Python reference on the same calls, timed alternately (so a change
    #    in machine load hits both sides); same decisions checked after every reference call:
    #    locations, policy state and the device buffer's bytes
    calls = [work.call(steps) for _ in range(args.calls)]
    fast, slow = copy.deepcopy(base), copy.deepcopy(base)
    dev_fast, dev_slow = dev.clone(), dev.clone()
    t_fast, t_slow, t_floor, t_swap_cpu, t_cold = [], [], [], [], []
    evict = torch.ones(2 * CACHE_BYTES, dtype=torch.uint8)  # written between floors: evicts
    host_words, floor_words = row_words(host), row_words(dev.clone())
    now = clock()  # the floor's clock: thread CPU time with one thread (see floors.py)
    for i, tokens in enumerate(calls):
        start, start_cpu = time.perf_counter(), now()
        locs = fast.swap(tokens, req, seq, host_cache=host, device_buffer=dev_fast)
        t_swap_cpu.append(now() - start_cpu)
        t_fast.append(time.perf_counter() - start)
        # the floor of this call: one index_copy_ of the rows it missed, timed right after it
        plan = fast.last_plan
        src, dst = planned_rows(plan.miss_src, plan.miss_dst, plan.miss_count, bs)
        start = now()
        floor_words.index_copy_(0, dst.long(), host_words.index_select(0, src))
        t_floor.append(now() - start)
        # the same copy from cold caches, as the swap meets its rows (fresh tokens, not read
        # since they were written): the warm floor above reads what the swap just pulled in
        evict.add_(1)
        start = now()
        floor_words.index_copy_(0, dst.long(), host_words.index_select(0, src))
        t_cold.append(now() - start)
        if i < args.naive_calls:
            start = time.perf_counter()
            ref = naive_swap(slow, tokens, req, seq, host, dev_slow)
            t_slow.append(time.perf_counter() - start)
            assert torch.equal(locs, ref), f"call {i}: locations differ from the reference"
            for name in ("slot_tokens", "slot_stamp", "clock"):
                assert torch.equal(getattr(fast.state, name)[0], getattr(slow.state, name)[0]), name
            assert torch.equal(dev_fast, dev_slow), f"call {i}: copied rows differ"
    tf, ts = statistics.median(t_fast), statistics.median(t_slow)
    misses = fast.last_stats.misses.sum().item()
    print(floor_line("HiSparse swap", min(t_swap_cpu), min(t_floor),
                     f"index_copy_ of the call's {misses} missed {args.row_bytes} B rows"))  # fmt: skip
    print(floor_line("HiSparse swap vs a cold copy", min(t_swap_cpu), min(t_cold),
                     "the same index_copy_ after evicting the caches"))  # fmt: skip
    if args.profile:
        profiled, later = copy.deepcopy(fast), iter([work.call(steps) for _ in range(6)])
        profiled_dev = dev_fast.clone()
        path = write_profile("HiSparse swap", lambda: profiled.swap(
            next(later), req, seq, host_cache=host, device_buffer=profiled_dev))  # fmt: skip
        print(f"profile of HiSparse swap: {path}")
    print(f"swap call: torch {tf * 1e3:.2f} ms, naive Python {ts * 1e3:.1f} ms -> "
          f"{ts / tf:.1f}x (target >= 30x); {misses} distinct misses in the last call")  # fmt: skip

    # 2. copy bandwidth: the swap's planned copy vs index_copy_ of the same rows
    plan = fast.last_plan
    count = int(plan.miss_count.sum())
    nbytes = count * args.row_bytes
    cols = torch.arange(plan.miss_src.shape[1])
    keep = cols[None, :] < plan.miss_count[:, None].long()
    src, dst = plan.miss_src[keep], plan.miss_dst[keep].long()
    scratch = dev.clone()
    planned = PlannedCopy(miss_src=plan.miss_src, miss_dst=plan.miss_dst, miss_count=plan.miss_count,
                          num_real=torch.tensor([bs], dtype=torch.int32), host_cache=host,
                          device_buffer=scratch, num_real_int=bs)  # fmt: skip
    t_plan = _median_time(lambda: copy_planned_torch(planned), 20)
    host_w, scratch_w = row_words(host), row_words(scratch)  # the fastest form of the baseline
    t_ref = _median_time(lambda: scratch_w.index_copy_(0, dst, host_w.index_select(0, src)), 20)
    bw_plan, bw_ref, bw_swap = nbytes / t_plan / 1e9, nbytes / t_ref / 1e9, nbytes / tf / 1e9
    print(f"copy: {count} rows, {nbytes / 1e6:.2f} MB: planned copy {bw_plan:.2f} GB/s, "
          f"index_copy_ {bw_ref:.2f} GB/s -> {bw_plan / bw_ref:.0%} (target >= 50%); whole swap "
          f"call {bw_swap:.2f} GB/s effective ({bw_swap / bw_ref:.0%})")  # fmt: skip

    # 3. one call of `steps` steps vs `steps` single-step calls on the same selections
    multi, single = copy.deepcopy(fast), copy.deepcopy(fast)
    t_multi, t_single, c_multi, c_single, c_nodedup = [], [], 0, 0, 0
    for _ in range(args.calls):
        tokens = work.call(steps)
        held = multi.slot_tokens[0].long()
        for s in range(steps):  # copies a per-step resolve without cross-step dedup would make
            c_nodedup += sum(
                int((~torch.isin(tokens[b, s].long().unique(), held[b])).sum()) for b in range(bs)
            )
        start = time.perf_counter()
        multi.swap(tokens, req, seq, host_cache=host, device_buffer=dev_fast)
        t_multi.append(time.perf_counter() - start)
        c_multi += int(multi.last_stats.misses.sum())
        start = time.perf_counter()
        for s in range(steps):
            single.swap(tokens[:, s].contiguous(), req, seq[:, s].contiguous(), host_cache=host,
                        device_buffer=dev_slow)  # fmt: skip
            c_single += int(single.last_stats.misses.sum())
        t_single.append(time.perf_counter() - start)
    tm, tsn = statistics.median(t_multi), statistics.median(t_single)
    print(f"{steps} steps in one call vs {steps} single-step calls: copies {c_multi} vs {c_single} "
          f"({1 - c_multi / max(c_single, 1):.0%} saved), time {tm * 1e3:.2f} vs {tsn * 1e3:.2f} ms "
          f"({tsn / tm:.2f}x); resolving the {steps} steps in one call without cross-step dedup "
          f"would copy {c_nodedup} ({1 - c_multi / max(c_nodedup, 1):.0%} saved by dedup)")  # fmt: skip


if __name__ == "__main__":
    main()
