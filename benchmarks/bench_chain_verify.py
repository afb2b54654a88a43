"""Chain verification on CPU: vectorised torch path vs a naive per-request Python loop.

    python benchmarks/bench_chain_verify.py                 # b=64, n=8, V=32000
    python benchmarks/bench_chain_verify.py --b 16 --v 4096 --repeats 3

Prints, from one run on this machine, the time of each path and the speed ratio, each path's
floor (one read of the logit/probability rows it must read, see floors.py) and its time as a
multiple of that floor, and the peak extra memory of the vectorised sampling path as a fraction
of its input size.

Floors. Greedy must read the row of every position a request reaches (its accepted drafts and
its bonus row); the whole-logits read (`logits.sum()`) is printed beside it. Sampling must read
the emitting p row of every request, and the q row of every request that rejected a draft.

Timings of the vectorised path use check_values=False (the naive loop checks nothing); the cost
of the CPU value checks is printed separately. The sampling path is the default one: compiled
(numba) where numba is installed; its floor line is printed for the torch path too.

Memory is measured, not computed: a fresh subprocess builds the inputs, resets its peak resident
set size (writes 5 to /proc/self/clear_refs, Linux), runs the verification once and reads the
peak (VmHWM) again. The difference is the most memory the call held on top of its inputs (glibc
returns large blocks to the OS on free, so the high-water mark sees every large temporary).
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time

import torch
from floors import (
    floor_line,
    interleaved_best,
    print_greedy_floors,
    read_all,
    read_rows,
    write_profile,
)

from specreg.kernels.argmax import row_argmax
from specreg.kernels.chain import (
    verify_chain_greedy,
    verify_chain_greedy_from_predict,
    verify_chain_sampling,
)
from specreg.kernels.chain.types import ChainVerifyResult
from specreg.kernels.block_race import block_race_torch
from specreg.kernels.random_stream import draw_lanes_torch
from specreg.kernels.random_stream.types import RESIDUAL_ROLE, SAMPLE_ROLE


def make_inputs(b: int, n: int, vocab: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    p = torch.rand(b, n, vocab, generator=gen)
    p.pow_(8)  # peaked rows
    p /= p.sum(-1, keepdim=True)
    q = torch.rand(b, n - 1, vocab, generator=gen)
    q.pow_(8)
    q /= q.sum(-1, keepdim=True)
    # draft the most likely target token half of the time so chains get accepted partly
    candidates = torch.randint(0, vocab, (b, n), generator=gen)
    agree = torch.rand(b, n - 1, generator=gen) < 0.7
    candidates[:, 1:] = torch.where(agree, p[:, :-1].argmax(-1), candidates[:, 1:])
    return {
        "candidates": candidates,
        "p": p,
        "q": q,
        "coins": torch.rand(b, n - 1, generator=gen),
        "keys": torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
        "positions": torch.randint(0, 4096, (b,), generator=gen),
    }


def naive_greedy(candidates: torch.Tensor, logits: torch.Tensor) -> list[list[int]]:
    out = []
    for r in range(candidates.shape[0]):
        tokens = []
        i = 0
        while True:
            predict = int(torch.argmax(logits[r, i]))
            if i + 1 < candidates.shape[1] and int(candidates[r, i + 1]) == predict:
                tokens.append(predict)
                i += 1
                continue
            tokens.append(predict)
            break
        out.append(tokens)
    return out


def naive_sampling(x: dict[str, torch.Tensor]) -> list[list[int]]:
    candidates, p, q = x["candidates"], x["p"], x["q"]
    out = []
    for r in range(candidates.shape[0]):
        tokens = []
        i = 0
        while i < candidates.shape[1] - 1:
            token = int(candidates[r, i + 1])
            if float(x["coins"][r, i]) * float(q[r, i, token]) < float(p[r, i, token]):
                tokens.append(token)
                i += 1
            else:
                break
        role = SAMPLE_ROLE
        if i < candidates.shape[1] - 1:
            role = RESIDUAL_ROLE
            weights = (p[r, i] - q[r, i]).clamp_min(0)
            if float(weights.sum()) <= 0:
                weights = p[r, i]
        else:
            weights = p[r, i]
        lanes = draw_lanes_torch(x["keys"][r : r + 1], role, x["positions"][r : r + 1] + i)
        tokens.append(int(block_race_torch(weights[None].float(), lanes)[0]))
        out.append(tokens)
    return out


def emitted(result: ChainVerifyResult) -> list[list[int]]:
    counts = result.num_emitted.tolist()
    return [row[:k] for row, k in zip(result.output_tokens.tolist(), counts, strict=True)]


def timed(fn, repeats: int) -> tuple[float, object]:
    times, value = [], None
    for _ in range(repeats):
        start = time.perf_counter()
        value = fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), value


def measure_memory(b: int, n: int, vocab: int, check_values: bool,
                   warm: bool = False) -> dict[str, float]:
    """`warm`: one small call first (numba's import and the compiled path's load, about 130 MiB
    once per process where numba is installed), so the peak is the call's own."""
    script = f"""
CHECK = {check_values!r}
WARM = {warm!r}
import json, resource, torch, sys
sys.path.insert(0, {sys.path[0]!r})
from bench_chain_verify import make_inputs
from specreg.kernels.chain import verify_chain_sampling
torch.set_num_threads(1)
x = make_inputs({b}, {n}, {vocab}, 0)
if WARM:
    w = make_inputs(2, {n}, 300, 1)
    verify_chain_sampling(w['candidates'], w['p'], w['q'], coins=w['coins'], keys=w['keys'],
                          positions=w['positions'], check_values=CHECK)
def status(key):
    with open('/proc/self/status') as f:
        for line in f:
            if line.startswith(key + ':'):
                return int(line.split()[1]) * 1024
with open('/proc/self/clear_refs', 'w') as f:
    f.write('5')  # reset the peak RSS (VmHWM) to the current RSS
before = status('VmHWM')
current = status('VmRSS')
verify_chain_sampling(x['candidates'], x['p'], x['q'], coins=x['coins'], keys=x['keys'],
                      positions=x['positions'],
                      check_values=CHECK)
after = status('VmHWM')
inputs = sum(t.numel() * t.element_size() for t in x.values())
print(json.dumps(dict(before=before, current=current, after=after, inputs=inputs)))
"""
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout.strip().splitlines()[-1])


def print_floors(x: dict[str, torch.Tensor], repeats: int, profile: bool = False) -> None:
    """Each path against one read of the rows it must read, timed interleaved."""
    b, n, _ = x["p"].shape
    greedy = verify_chain_greedy(x["candidates"], x["p"], check_values=False)
    reached = int((greedy.accept_len.long() + 1).sum())
    times = interleaved_best(
        {
            "greedy": lambda: verify_chain_greedy(x["candidates"], x["p"], check_values=False),
            "argmax": lambda: verify_chain_greedy_from_predict(  # what a user would write
                x["candidates"], torch.argmax(x["p"], dim=-1), check_values=False
            ),
            "reached": read_rows(x["p"], reached),
            "all": read_all(x["p"]),
            "row argmax": lambda: row_argmax(x["p"]),
            "torch.argmax": lambda: torch.argmax(x["p"], dim=-1),
        },
        repeats,
    )
    what = f"read of the {reached} of {b * n} rows the requests reach"
    print_greedy_floors("chain", times, what)
    for name in ("row argmax", "torch.argmax"):  # the argmax alone, over every row
        print(floor_line(f"{name} of all the logits", times[name], times["all"],
                         "read of all the logits, logits.sum()"))  # fmt: skip

    sampled = verify_chain_sampling(x["candidates"], x["p"], x["q"], coins=x["coins"],
                                    keys=x["keys"], positions=x["positions"], check_values=False)  # fmt: skip
    rejected = int((sampled.accept_len < n - 1).sum())
    p_rows, q_rows = read_rows(x["p"], b), read_rows(x["q"], rejected)
    times = interleaved_best(
        {
            "sampling": lambda: verify_chain_sampling(
                x["candidates"], x["p"], x["q"], coins=x["coins"], keys=x["keys"], positions=x["positions"],
                check_values=False,
            ),
            "sampling, torch path": lambda: verify_chain_sampling(
                x["candidates"], x["p"], x["q"], coins=x["coins"], keys=x["keys"], positions=x["positions"],
                check_values=False, backend="torch",
            ),
            "floor": lambda: (p_rows(), q_rows()),
        },
        repeats,
    )
    what = f"read of the {b} emitting p rows and {rejected} rejected q rows"
    print(floor_line("chain sampling verify", times["sampling"], times["floor"], what))
    # the default path is the compiled one where numba is installed; the torch path is the
    # fallback without it
    print(floor_line("chain sampling verify, torch path", times["sampling, torch path"],
                     times["floor"], what))
    if profile:
        for name, fn in (
            ("chain greedy verify", lambda: verify_chain_greedy(x["candidates"], x["p"], check_values=False)),
            ("chain sampling verify", lambda: verify_chain_sampling(
                x["candidates"], x["p"], x["q"], coins=x["coins"], keys=x["keys"], positions=x["positions"],
                check_values=False)),
        ):  # fmt: skip
            print(f"profile of {name}: {write_profile(name, fn)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--b", type=int, default=64)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--v", type=int, default=32000)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--no-memory", action="store_true", help="skip the memory subprocess")
    parser.add_argument("--profile", action="store_true",
                        help="write a torch.profiler table of each path to results/profiles/")
    parser.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads (default: torch's choice); 1 avoids stalls "
                    "of parallel ops on a machine shared with other jobs")
    args = parser.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)

    x = make_inputs(args.b, args.n, args.v, seed=0)
    print(f"chain verify on CPU: b={args.b} n={args.n} V={args.v}, "
          f"torch {torch.__version__}, {torch.get_num_threads()} threads, median of {args.repeats}")

    t_vec, vec = timed(
        lambda: verify_chain_greedy(x["candidates"], x["p"], check_values=False), args.repeats
    )
    t_naive, naive = timed(lambda: naive_greedy(x["candidates"], x["p"]), args.repeats)
    assert emitted(vec) == naive, "greedy: vectorised and naive results differ"
    print(f"greedy    vectorised {t_vec * 1e3:8.2f} ms   naive loop {t_naive * 1e3:8.2f} ms   "
          f"speed-up x{t_naive / t_vec:.1f}   mean accepted {vec.accept_len.float().mean():.2f}")

    def run_vec():
        return verify_chain_sampling(
            x["candidates"], x["p"], x["q"], coins=x["coins"], keys=x["keys"], positions=x["positions"],
            check_values=False,
        )

    t_vec, vec = timed(run_vec, args.repeats)
    t_naive, naive = timed(lambda: naive_sampling(x), args.repeats)
    same = sum(a == b for a, b in zip(emitted(vec), naive, strict=True))
    print(f"sampling  vectorised {t_vec * 1e3:8.2f} ms   naive loop {t_naive * 1e3:8.2f} ms   "
          f"speed-up x{t_naive / t_vec:.1f}   mean accepted {vec.accept_len.float().mean():.2f}   "
          f"identical outputs {same}/{args.b}")

    t_checked, _ = timed(
        lambda: verify_chain_sampling(
            x["candidates"], x["p"], x["q"], coins=x["coins"], keys=x["keys"], positions=x["positions"]
        ),
        args.repeats,
    )
    print(f"sampling with CPU value checks (the default on CPU): {t_checked * 1e3:.2f} ms "
          f"(checks cost x{t_checked / t_vec:.2f} of the unchecked call)")

    print_floors(x, args.repeats * 3, args.profile)

    if not args.no_memory:
        for check, warm in ((False, False), (True, False), (False, True)):
            mem = measure_memory(args.b, args.n, args.v, check, warm)
            extra = max(mem["after"] - mem["before"], 0)
            print(f"sampling peak extra memory, value checks {'on ' if check else 'off'} "
                  f"(VmHWM reset, fresh process{', after a first small call' if warm else ''})"
                  f": {extra / 2**20:.1f} MiB = "
                  f"{extra / mem['inputs']:.3f} x input size ({mem['inputs'] / 2**20:.1f} MiB); "
                  f"peak before {mem['before'] / 2**20:.1f} MiB, rss {mem['current'] / 2**20:.1f} MiB")


if __name__ == "__main__":
    main()
