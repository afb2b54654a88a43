"""SGLang's HiSparse speculative swap manager (its CUDA kernel) against specreg's (`hisparse_swap`),
call for call on one GPU, at 2-4 draft tokens (SGLang's range) and beyond (specreg's alone).

Both managers are built by their own constructors over one coordinator-shaped set of SGLang
tables (``req_device_buffer_tokens`` / ``_token_locs``, ``req_to_host_pool``, the host and device
KV rows), each on its own copy, and called through the same ``swap_in`` SGLang's DSA backend
reaches. Each request's state is what SGLang's admission leaves: its first ``device_buffer_size``
tokens in the buffer, every token on host, the newest token and the verify tokens on the extra
page. Every call then:

1. checks both answers: every valid selected token's device row holds its KV (host or verify),
   invalid entries read -1, padding rows 0, and buffer / extra-page hits read exactly the rows
   SGLang's tables name (the contract tests/adapters/sglang_hisparse_runtime.py pins on CPU);
2. times both with CUDA events (median of ``--calls``), on the same drifting workload
   (``--new-frac`` of each selection replaced per step).

    python benchmarks/gpu/sglang_hisparse_compare.py [--steps 2 3 4 8] [--bs 16] [--top-k 2048]
    python benchmarks/gpu/sglang_hisparse_compare.py --dry-run   # CPU: the setup and checks,
        # specreg's side run on CPU, SGLang's wrapper given the same arguments without a launch

Needs SGLang (0.5.23) importable and, for the timed run, a CUDA device and the toolchain its
run-time compiled kernel needs; says which is missing instead of failing obscurely.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from pathlib import Path
from types import SimpleNamespace
from typing import Any

ROOT = Path(__file__).resolve().parents[2]
sys.path.insert(0, str(ROOT))


class Allocator:
    """The scratch allocator SGLang's manager asks at admission (consecutive free rows)."""

    def __init__(self, start: int) -> None:
        self.next = start

    def alloc(self, n: int) -> Any:
        import torch

        rows = torch.arange(self.next, self.next + n, dtype=torch.int64)
        self.next += n
        return rows


def coordinator(args: argparse.Namespace, steps: int, device: str, torch: Any) -> Any:
    """SGLang's tables for `args.bs` admitted requests (see the module docstring)."""
    bs, top_k, hot, page, seq, layers = args.bs, args.top_k, args.buffer, 64, args.seq_len, 1
    slots, padded, row_elems = bs + 1, args.buffer + 64, args.row_bytes
    scratch = max(1024, steps * top_k)  # enough for either manager's scratch
    device_rows = slots * (padded + scratch) + 1
    host_rows = slots * (seq + page)
    gen = torch.Generator().manual_seed(steps)
    host = torch.randint(0, 255, (host_rows, row_elems), dtype=torch.uint8, generator=gen)
    host = host.pin_memory() if device == "cuda" else host
    dev = torch.zeros((device_rows, row_elems), dtype=torch.uint8, device=device)
    tokens = torch.full((layers, slots, padded), -1, dtype=torch.int32)
    locs = torch.full((layers, slots, padded), -1, dtype=torch.int32)
    host_locs = torch.full((slots, seq + page), -1, dtype=torch.int64)
    to_device = torch.zeros((slots, padded), dtype=torch.int64)
    verify_kv = {}
    for r in range(bs):
        rows = torch.arange(1 + r * padded, 1 + (r + 1) * padded)  # row 0: padding's target
        to_device[r] = rows
        locs[:, r] = rows.int()
        tokens[:, r, :hot] = torch.arange(hot, dtype=torch.int32)
        host_locs[r, :seq] = torch.arange(r * (seq + page), r * (seq + page) + seq)
        dev[rows[:hot].to(device)] = host[host_locs[r, :hot]].to(device)
        # the extra page: the newest token in its first slot, then this verify's tokens
        tokens[:, r, hot] = seq - 1
        dev[rows[hot].to(device)] = host[host_locs[r, seq - 1]].to(device)
        for i in range(steps):
            tokens[:, r, hot + 1 + i] = seq + i
            kv = torch.randint(0, 255, (row_elems,), dtype=torch.uint8, generator=gen)
            dev[rows[hot + 1 + i].to(device)] = kv.to(device)
            verify_kv[(r, seq + i)] = kv
    mem_host = SimpleNamespace(kv_buffer=[host])
    mem_device = SimpleNamespace(kv_buffer=[dev], layer_num=layers)
    allocator = SimpleNamespace(hisparse_attn_allocator=Allocator(slots * padded + 1))

    class Coordinator(SimpleNamespace):  # weak-referenceable, as the managers require
        pass

    return Coordinator(
        mem_pool_device=mem_device, mem_pool_host=mem_host,
        req_to_token_pool=SimpleNamespace(req_to_token=torch.zeros((slots, 1), dtype=torch.int32)),
        device=device, top_k=top_k, device_buffer_size=hot, padded_buffer_size=padded,
        page_size=page, is_dsv4_hisparse=False, token_to_kv_pool_allocator=allocator,
        req_device_buffer_tokens=tokens.to(device), req_device_buffer_token_locs=locs.to(device),
        req_to_host_pool=host_locs.to(device), req_to_device_buffer=to_device.to(device),
        num_real_reqs=torch.tensor([bs], dtype=torch.int32, device=device), verify_kv=verify_kv,
    )  # fmt: skip


def build(manager_class: type, coord: Any, steps: int, bs: int) -> Any:
    manager = manager_class(coord, num_draft_tokens=steps)
    for r in range(bs):
        manager.allocate_scratch(r)
        manager.reset(r)
    return manager


def check(coord: Any, before: tuple[Any, Any], top_k: Any, seq: Any, out: Any, args) -> int:
    """Every valid token's row holds its KV; invalid -1; buffer and extra-page hits on exactly
    the rows the tables named before the call. Returns the tokens checked."""
    import torch

    tokens_before, locs_before = (t.cpu() for t in before)
    host, dev = coord.mem_pool_host.kv_buffer[0], coord.mem_pool_device.kv_buffer[0].cpu()
    host_locs = coord.req_to_host_pool.cpu()
    out, top_k, seq = out.cpu(), top_k.cpu(), seq.cpu()
    hot, page, steps, checked = args.buffer, 64, top_k.shape[1], 0
    for r in range(args.bs):
        held = {t: int(locs_before[0, r, j]) for j, t in enumerate(tokens_before[0, r].tolist())
                if t >= 0}
        for s in range(steps):
            visible = int(seq[r * steps + s])
            for token, loc in zip(top_k[r, s].tolist(), out[r, s].tolist(), strict=True):
                if not 0 <= token < visible:
                    assert loc == -1, (r, s, token, loc)
                    continue
                if token in held and (token < hot or token >= visible - page):
                    assert loc == held[token], ("hit row", r, token, loc, held[token])
                want = coord.verify_kv.get((r, token))
                want = host[host_locs[r, token]] if want is None else want
                assert torch.equal(dev[loc], want.cpu()), ("row contents", r, s, token, loc)
                checked += 1
    return checked


def workload(args: argparse.Namespace, steps: int, calls: int, torch: Any) -> list[Any]:
    """`calls` top-k tensors [bs, steps, top_k]: a selection drifting by `new_frac` per step,
    with a -1 and a token past each step's length in every row."""
    gen = torch.Generator().manual_seed(100 + steps)
    seq = args.seq_len
    selection = torch.stack([torch.randperm(seq, generator=gen)[: args.top_k - 2]
                             for _ in range(args.bs)])
    fresh = max(1, round(args.new_frac * args.top_k))
    out = []
    for _ in range(calls):
        step_sel = []
        for s in range(steps):
            for b in range(args.bs):
                at = torch.randperm(args.top_k - 2, generator=gen)[:fresh]
                selection[b, at] = torch.randint(0, seq + s, (fresh,), generator=gen)
            tail = torch.tensor([[-1, seq + s + 5]] * args.bs)
            step_sel.append(torch.cat([selection, tail], 1))
        out.append(torch.stack(step_sel, 1).to(torch.int32))
    return out


def run(args: argparse.Namespace) -> None:
    import torch

    try:
        import sglang.srt.managers.hisparse_coordinator as hc
        from sglang.kernels.ops.kvcache import hisparse as kernels
    except ImportError as exc:
        sys.exit(f"SGLang is not importable here ({exc}): run this inside the pinned SGLang "
                 "environment (tests/adapters/envs.py), with its CUDA toolchain for the timed run")
    from specreg_hisparse.sglang_seam import manager_class

    device = "cpu" if args.dry_run else "cuda"
    if not args.dry_run and not torch.cuda.is_available():
        sys.exit("no CUDA device: pass --dry-run to check the setup on CPU")
    sglangs = hc.HiSparseSpecSwapManager
    ours = manager_class(sglangs)
    launched: list[dict[str, Any]] = []
    if args.dry_run:  # SGLang's wrapper checks the arguments; the launch is recorded instead
        kernels._jit_spec_module = lambda *key: SimpleNamespace(
            load_cache_to_device_buffer_spec=lambda *a: launched.append({"key": key}))
    print(f"{'steps':>5} {'bs':>3} {'top_k':>5} {'SGLang ms':>10} {'specreg ms':>11} "
          f"{'checked':>8}  specreg / SGLang")
    for steps in args.steps:
        seq = (args.seq_len + torch.arange(1, steps + 1)).repeat(args.bs).to(torch.int32)
        req = torch.arange(args.bs, dtype=torch.int64)
        inputs = workload(args, steps, args.calls + 2, torch)
        times, checked = {}, 0
        sides = [("specreg", ours)] + ([("SGLang", sglangs)] if 2 <= steps <= 4 else [])
        for name, cls in sides:
            coord = coordinator(args, steps, device, torch)
            manager = build(cls, coord, steps, args.bs)
            samples = []
            for call, top_k in enumerate(inputs):
                before = (coord.req_device_buffer_tokens.clone(),
                          coord.req_device_buffer_token_locs.clone())
                top_k_d, seq_d, req_d = top_k.to(device), seq.to(device), req.to(device)
                if device == "cuda":
                    start, end = torch.cuda.Event(True), torch.cuda.Event(True)
                    start.record()
                    out = manager.swap_in(req_d, seq_d, top_k_d, 0)
                    end.record()
                    torch.cuda.synchronize()
                    elapsed = start.elapsed_time(end)
                else:
                    began = time.perf_counter()
                    out = manager.swap_in(req_d, seq_d, top_k_d, 0)
                    elapsed = (time.perf_counter() - began) * 1e3
                if call >= 2:
                    samples.append(elapsed)
                if name == "specreg" or not args.dry_run:  # a recorded launch computed nothing
                    if call < args.check_calls:
                        checked += check(coord, before, top_k, seq, out, args)
            times[name] = statistics.median(samples)
        sglang_ms = (f"{times['SGLang']:>10.3f}" if "SGLang" in times and not args.dry_run
                     else f"{'-':>10}")
        ratio = (f"{times['specreg'] / times['SGLang']:.2f}x" if "SGLang" in times and
                 not args.dry_run else "(SGLang's kernel takes 2-4 steps)" if steps > 4 else
                 "(dry run: SGLang's launch recorded, not timed)")
        print(f"{steps:>5} {args.bs:>3} {args.top_k:>5} {sglang_ms} {times['specreg']:>11.3f} "
              f"{checked:>8}  {ratio}")
    if args.dry_run:
        print(f"dry run: SGLang's wrapper accepted {len(launched)} launches "
              f"(compile keys {sorted({str(x['key']) for x in launched})})")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--steps", type=int, nargs="+", default=[2, 3, 4, 8])
    parser.add_argument("--bs", type=int, default=16)
    parser.add_argument("--top-k", type=int, default=2048)
    parser.add_argument("--buffer", type=int, default=4096, help="device_buffer_size")
    parser.add_argument("--seq-len", type=int, default=16384)
    parser.add_argument("--row-bytes", type=int, default=656)
    parser.add_argument("--new-frac", type=float, default=0.05)
    parser.add_argument("--calls", type=int, default=20)
    parser.add_argument("--check-calls", type=int, default=3, help="calls whose rows are checked")
    parser.add_argument("--dry-run", action="store_true")
    args = parser.parse_args()
    if args.dry_run and args.bs == 16:  # small, so the CPU run is quick
        args.bs, args.top_k, args.buffer, args.seq_len, args.calls = 2, 1024, 2048, 4096, 2
    run(args)


if __name__ == "__main__":
    main()
