"""The interpreter traffic counter of benchmarks/bench_traffic.py counts what a kernel loads and
touches: a planted kernel that reads its row twice and half a row once more is counted exactly."""

import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

_SCRIPT = textwrap.dedent(
    """
    import sys
    sys.path.insert(0, "benchmarks")
    import bench_traffic  # sets TRITON_INTERPRET before triton is imported
    import torch
    import triton
    import triton.language as tl

    @triton.jit
    def _twice_kernel(x_ptr, out_ptr, n, BLOCK: tl.constexpr):
        cols = tl.arange(0, BLOCK)
        inside = cols < n
        a = tl.load(x_ptr + cols, mask=inside, other=0.0)
        b = tl.load(x_ptr + cols, mask=inside, other=0.0)
        c = tl.load(x_ptr + cols, mask=cols < n // 2, other=0.0)
        tl.store(out_ptr + cols, a + b + c, mask=inside)

    bench_traffic._install()
    x = torch.arange(100, dtype=torch.float32)
    out = torch.empty(100)
    _twice_kernel[(1,)](x, out, 100, BLOCK=128)
    t = bench_traffic.TRAFFIC
    assert torch.equal(out, 2 * x + torch.where(torch.arange(100) < 50, x, 0.0))
    print(t.loaded["_twice_kernel"], t.distinct("_twice_kernel"), t.stored["_twice_kernel"])
    print(bench_traffic.report("planted", "_twice_kernel", 400))
    """
)


def test_counter_counts_a_planted_kernel_exactly():
    done = subprocess.run([sys.executable, "-c", _SCRIPT], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stderr[-3000:]
    counts, line, multiple = done.stdout.strip().splitlines()
    assert counts == "1000 400 400"  # 250 elements loaded of 100 distinct, 100 stored, 4 B each
    assert line.startswith("TRAFFIC planted: loaded 1000 B, distinct 400 B, must read 400 B")
    assert float(multiple) == 2.5
