"""The keyed random stream's cost: the chain rules before and after keying every draw on the
stream, the drafter-invariant rule against the standard one, and the stream per element.

    python benchmarks/bench_keyed_stream.py [--baseline REV] [--threads 1]

One run, one machine, the same inputs for every path:

- **standard rule, before / after**: `verify_chain_sampling` (b 64, n 8, V 32768, float32 p and
  q, one thread) at `--baseline` (default 6340617, the last commit that keyed the correction by
  one float coin; checked out into a temporary git worktree and run in a subprocess) and at this
  checkout. The target for the change is <= 1.2x.
- **invariant / standard**: `verify_chain_invariant` against `verify_chain_sampling` on the same
  inputs (the invariant rule races every row a request reaches instead of reading one row).
- **stream per element**: the SAMPLE-role words and exponentials of V tokens for b rows
  (`draw_lanes_torch` + `token_words_torch` + `exponentials_of`) against one read of the same
  b x V float32 row (`sum`): what drawing a whole row from the stream costs beside reading it.
  The race itself draws only V / 128 + 128 values per emitted token.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
BASELINE = "6340617"

#: Timed in a subprocess (so the baseline's modules load from its own tree); prints one JSON.
SNIPPET = r"""
import json, sys, time, torch
torch.set_num_threads(int(sys.argv[1]))
from specreg.kernels.chain import verify_chain_sampling
b, n, V = 64, 8, 32768
g = torch.Generator().manual_seed(0)
p = torch.softmax(torch.randn(b, n, V, generator=g) * 3, -1)
q = torch.softmax(torch.randn(b, n - 1, V, generator=g) * 3, -1)
cand = torch.randint(0, V, (b, n), generator=g)
keyed = "keys" in verify_chain_sampling.__code__.co_varnames
extra = ({"keys": torch.arange(b) + 7, "positions": torch.arange(b)} if keyed
         else {"seed": 7, "offsets": torch.arange(b)})
def best(fn, repeat=7):
    fn()
    times = []
    for _ in range(repeat):
        t = time.perf_counter(); fn(); times.append(time.perf_counter() - t)
    return min(times)
out = {"standard": best(lambda: verify_chain_sampling(cand, p, q, check_values=False, **extra)),
       "target_only": best(lambda: verify_chain_sampling(cand, p, None, check_values=False, **extra))}
if keyed:
    from specreg.kernels.chain import verify_chain_invariant
    from specreg.kernels.random_stream.torch_impl import (
        draw_lanes_torch, exponentials_of, token_words_torch)
    out["invariant"] = best(lambda: verify_chain_invariant(cand, p, check_values=False, **extra))
    rows = p[:, 0].contiguous()
    tokens = torch.arange(V)
    def stream():
        lanes = draw_lanes_torch(extra["keys"], 0, extra["positions"])
        return exponentials_of(token_words_torch((lanes[:, :1], lanes[:, 1:]), tokens))
    out["stream_row"] = best(stream)
    out["read_row"] = best(lambda: rows.sum(-1))
print(json.dumps(out))
"""


def run(tree: Path, threads: int) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": f"{tree}:{tree / 'plugins'}",
           "SPECREG_KERNEL_BACKEND": "torch"}
    done = subprocess.run([sys.executable, "-c", SNIPPET, str(threads)], cwd=tree, env=env,
                          capture_output=True, text=True, check=True)
    return json.loads(done.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--baseline", default=BASELINE)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        base_tree = Path(tmp) / "baseline"
        subprocess.run(["git", "worktree", "add", "--detach", str(base_tree), args.baseline],
                       cwd=ROOT, check=True, capture_output=True)
        try:
            before = run(base_tree, args.threads)
        finally:
            subprocess.run(["git", "worktree", "remove", "--force", str(base_tree)], cwd=ROOT,
                           check=False, capture_output=True)
    after = run(ROOT, args.threads)
    print(f"load average {os.getloadavg()[0]:.2f}; b 64, n 8, V 32768, {args.threads} thread(s)")
    for rule in ("standard", "target_only"):
        ratio = after[rule] / before[rule]
        print(f"{rule} rule: before {before[rule] * 1e3:.2f} ms, after {after[rule] * 1e3:.2f} ms"
              f"  after / before = {ratio:.2f}x (target <= 1.2x: "
              f"{'met' if ratio <= 1.2 else 'not met'})")
    print(f"invariant rule {after['invariant'] * 1e3:.2f} ms  invariant / standard = "
          f"{after['invariant'] / after['standard']:.2f}x")
    print(f"stream, b x V values {after['stream_row'] * 1e3:.2f} ms; one read of b x V float32 "
          f"{after['read_row'] * 1e3:.2f} ms  stream / read = "
          f"{after['stream_row'] / after['read_row']:.1f}x per element")


if __name__ == "__main__":
    main()
