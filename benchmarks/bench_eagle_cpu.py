"""EAGLE kernels, torch path vs a naive per-request Python loop (one run, same machine).

    python benchmarks/bench_eagle_cpu.py                 # small default sizes
    python benchmarks/bench_eagle_cpu.py --target-sizes   # b=64, topk=4, steps=4, N=16, V=32k

Greedy verify is timed from the target argmax (both sides get the same `target_predict`), so the
ratio measures the tree walk, not the shared argmax. Then each verify, from the logits /
probabilities, against its floor (see floors.py): greedy must read the row of every node on the
accepted path (its children are checked against that row's argmax); the whole-logits read is
printed beside it. Target-only sampling must read the final row of every request (the walk
reads single probabilities); with q it must also read q's final row. Also prints the peak extra memory of
verify_tree_sampling as a fraction of its input size (tracked with torch's CPU allocator
profiler,
per op call: the largest single temporary, not the sum of live tensors).
"""

from __future__ import annotations

import argparse
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
from specreg_eagle.kernels.select_topk import organize_draft_results, select_top_k_tokens
from specreg.backend import requested_backend
from specreg.kernels.tree_build.torch_impl import build_tree_torch
from specreg.kernels.tree_build.types import TreeBuildInputs
from specreg.kernels.tree_verify_greedy import verify_tree_greedy
from specreg.kernels.tree_verify_greedy.torch_impl import verify_tree_greedy_torch
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg.kernels.tree_coins import caller_tree_coins
from specreg.kernels.tree_verify_sampling.numba_impl import available as numba_available
from specreg.kernels.tree_verify_sampling.torch_impl import verify_tree_sampling_torch
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs

from specreg.kernels.block_race import block_race_torch
from specreg.kernels.random_stream import draw_lanes_torch
from specreg.kernels.random_stream.types import RESIDUAL_ROLE, SAMPLE_ROLE


def draft(b, topk, steps, n, vocab, gen):
    hidden = torch.randn(b, 8, generator=gen)
    tp, ti = torch.softmax(torch.randn(b, vocab, generator=gen), -1).topk(topk, -1)
    scores, lists = None, ([], [], [])
    for i in range(steps):
        _, hidden, scores, info = select_top_k_tokens(i, tp, ti, hidden, scores, topk)
        for lst, item in zip(lists, info, strict=True):
            lst.append(item)
        tp, ti = torch.softmax(torch.randn(b * topk, vocab, generator=gen), -1).topk(topk, -1)
    return organize_draft_results(*lists, n)


def naive_build(bonus, parent_list, sel, drafts, seq, topk, n):
    out = []
    for r in range(bonus.shape[0]):
        s = sel[r].tolist()
        parents = [-1] + [0 if v // topk == 0 else 1 + s.index(int(parent_list[r, v // topk])) for v in s]
        mask = torch.zeros(n, n, dtype=torch.bool)
        pos = torch.zeros(n, dtype=torch.int64)
        for t in range(n):
            cur, d = t, 0
            mask[t, 0] = True
            while cur != 0:
                mask[t, cur] = True
                d += 1
                cur = parents[cur]
            pos[t] = int(seq[r]) + d
        out.append((mask, pos, parents))
    return out


def naive_walk(cand, nt, ns, accept_fn):
    outs = []
    for r in range(cand.shape[0]):
        last, cur, path = 0, int(nt[r, 0]), []
        while cur != -1:
            if accept_fn(r, last, cur):
                path.append(int(cand[r, cur]))
                last, cur = cur, int(nt[r, cur])
            else:
                cur = int(ns[r, cur])
        outs.append((path, last))
    return outs


def naive_sampling(cand, nt, ns, p, coins, keys, positions):
    """The target-only walk one node at a time, then the final race on the keyed stream
    (RESIDUAL role after a tried child, SAMPLE otherwise, at the stopping depth's position)."""
    results = []
    for r in range(cand.shape[0]):
        last, cur, acc, removed, depth = 0, int(nt[r, 0]), 0.0, [], 0
        while cur != -1:
            x = int(cand[r, cur])
            px = float(p[r, last, x]) if x not in removed else 0.0
            acc += px
            if float(coins[r, last]) < acc:
                last, cur, acc, removed, depth = cur, int(nt[r, cur]), 0.0, [], depth + 1
            else:
                removed.append(x)
                cur = int(ns[r, cur])
        w = p[r, last].clone()
        if removed:
            w[removed] = 0
        if float(w.sum()) <= 0:
            w = p[r, last]
        role = RESIDUAL_ROLE if removed else SAMPLE_ROLE
        lanes = draw_lanes_torch(keys[r : r + 1], role, positions[r : r + 1] + depth)
        results.append(int(block_race_torch(w[None].float(), lanes)[0]))
    return results


def timeit(fn, repeat=3):
    best = float("inf")
    for _ in range(repeat):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def print_floors(cand, ridx, nt, ns, depth, logits, probs, q, coins, stream, repeats=9,
                 profile=False):
    """Both verifies, called as a user calls them (value checks off), against their floors."""
    b, n, _ = logits.shape
    tree = (cand, ridx, nt, ns)
    greedy = verify_tree_greedy(*tree, depth=depth, target_logits=logits, check_values=False)
    reached = int((greedy.accept_token_num.long() + 1).sum())

    def sample(q_probs):
        return verify_tree_sampling(*tree, probs, depth=depth, draft_probs=q_probs, coins=coins,
                                    **stream, check_values=False)  # fmt: skip

    times = interleaved_best(
        {
            "greedy": lambda: verify_tree_greedy(
                *tree, depth=depth, target_logits=logits, check_values=False
            ),
            "argmax": lambda: verify_tree_greedy(  # what a user would write
                *tree, depth=depth, target_predict=torch.argmax(logits, -1), check_values=False
            ),
            "reached": read_rows(logits, reached),
            "all": read_all(logits),
            "sampling": lambda: sample(None),
            "final rows": read_rows(probs, b),
            "sampling q": lambda: sample(q),
            "final rows q": lambda: (read_rows(probs, b)(), read_rows(q, b)()),
        },
        repeats,
    )
    what = f"read of the {reached} of {b * n} node rows on the accepted paths"
    print_greedy_floors("EAGLE tree", times, what)
    print(floor_line("EAGLE tree sampling verify", times["sampling"], times["final rows"],
                     f"read of the {b} final p rows"))  # fmt: skip
    print(floor_line("EAGLE tree sampling verify with q", times["sampling q"],
                     times["final rows q"], f"read of the {b} final p and q rows"))  # fmt: skip
    compiled = numba_available() and requested_backend() == "auto"
    print("tree sampling path: target-only "
          + ("compiled (numba, the cpu extra)" if compiled else "torch (numba absent or backend torch)")
          + ", with q torch")  # fmt: skip
    if profile:
        for name, fn in (
            ("EAGLE tree greedy verify", lambda: verify_tree_greedy(
                *tree, depth=depth, target_logits=logits, check_values=False)),
            ("EAGLE tree sampling verify", lambda: sample(None)),
            ("EAGLE tree sampling verify with q", lambda: sample(q)),
        ):  # fmt: skip
            print(f"profile of {name}: {write_profile(name, fn)}")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--target-sizes", action="store_true")
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--topk", type=int, default=4)
    ap.add_argument("--steps", type=int, default=4)
    ap.add_argument("--n", type=int, default=16)
    ap.add_argument("--vocab", type=int, default=4096)
    ap.add_argument("--threads", type=int, default=None,
                    help="torch intra-op threads (default: torch's choice); 1 avoids stalls "
                    "of parallel ops on a machine shared with other jobs")
    ap.add_argument("--profile", action="store_true",
                    help="write a torch.profiler table of each verify to results/profiles/")
    a = ap.parse_args()
    if a.threads:
        torch.set_num_threads(a.threads)
    if a.target_sizes:
        a.batch, a.topk, a.steps, a.n, a.vocab = 64, 4, 4, 16, 32768
    b, k, s, n, v = a.batch, a.topk, a.steps, a.n, a.vocab
    gen = torch.Generator().manual_seed(0)
    parent_list, sel, drafts = draft(b, k, s, n, v, gen)
    bonus = torch.randint(0, v, (b,), generator=gen)
    seq = torch.randint(10, 100, (b,), generator=gen)
    print(f"b={b} topk={k} steps={s} N={n} V={v}")

    kw = dict(topk=k, depth=s, num_verify_tokens=n, mask_mode="qlen_only")
    tree_inputs = TreeBuildInputs(bonus, parent_list, sel, drafts, seq, **kw)
    t_fast = timeit(lambda: build_tree_torch(tree_inputs))
    t_naive = timeit(lambda: naive_build(bonus, parent_list, sel, drafts, seq, k, n), 1)
    print(f"build_tree      torch {t_fast * 1e3:8.2f} ms  naive {t_naive * 1e3:8.2f} ms  ratio {t_naive / t_fast:6.1f}x")

    tree = build_tree_torch(tree_inputs)
    cand = tree.draft_tokens.view(b, n)
    nt, ns, ridx = tree.retrieve_next_token, tree.retrieve_next_sibling, tree.retrieve_index
    logits = torch.randn(b, n, v, generator=gen)
    predict = logits.argmax(-1)
    cand = torch.where(torch.rand(b, n, generator=gen) < 0.5, predict.roll(1, 1), cand)
    t_fast = timeit(lambda: verify_tree_greedy_torch(cand, ridx, nt, ns, predict, depth=s))
    t_naive = timeit(lambda: naive_walk(cand, nt, ns, lambda r, last, cur: int(cand[r, cur]) == int(predict[r, last])), 1)
    print(f"greedy verify   torch {t_fast * 1e3:8.2f} ms  naive {t_naive * 1e3:8.2f} ms  ratio {t_naive / t_fast:6.1f}x")

    probs = torch.softmax(logits, -1)
    coins = torch.rand(b, n, generator=gen)
    stream = {"keys": torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
              "positions": torch.randint(0, 4096, (b,), generator=gen)}
    keyed = (*caller_tree_coins(coins), stream["keys"], stream["positions"])
    target_only = TreeSamplingInputs(cand, ridx, nt, ns, probs, None, *keyed, depth=s)
    t_fast = timeit(lambda: verify_tree_sampling_torch(target_only))
    t_naive = timeit(lambda: naive_sampling(cand, nt, ns, probs, coins, **stream), 1)
    same = verify_tree_sampling_torch(target_only).bonus.tolist() == naive_sampling(
        cand, nt, ns, probs, coins, **stream)
    print(f"sampling verify torch {t_fast * 1e3:8.2f} ms  naive {t_naive * 1e3:8.2f} ms  ratio {t_naive / t_fast:6.1f}x"
          f"  same final tokens: {same}")

    q = torch.softmax(torch.randn(b, n, v, generator=gen), -1)
    print_floors(cand, ridx, nt, ns, s, logits, probs, q, coins, stream, profile=a.profile)
    for name, draft_probs in (("target-only", None), ("with q", q)):
        inputs = probs.numel() * 4 + (0 if draft_probs is None else q.numel() * 4)
        with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU], profile_memory=True) as prof:
            verify_tree_sampling_torch(
                TreeSamplingInputs(cand, ridx, nt, ns, probs, draft_probs, *keyed, depth=s)
            )
        peak = max(e.cpu_memory_usage for e in prof.events())  # per call, not summed
        print(f"sampling verify ({name}) largest single allocation {peak / 2**20:7.2f} MiB = "
              f"{peak / inputs:.3f} of the {inputs / 2**20:.1f} MiB input")


if __name__ == "__main__":
    main()
