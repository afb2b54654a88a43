"""The GPU script covers every Triton kernel: `benchmarks/gpu/bench_kernels_gpu.py`'s `ENTRIES` name
every `@triton.jit` `*_kernel` function of the repository's `triton_impl` modules (the inventory
tests/kernels/test_triton_compile.py compiles), so adding a kernel without a GPU benchmark entry
fails here; and its CPU dry run (interpreter, tiny sizes) runs every entry, agrees with torch, and
launches exactly the kernels each entry claims."""

from __future__ import annotations

import ast
import importlib.util
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
SCRIPT = ROOT / "benchmarks" / "gpu" / "bench_kernels_gpu.py"


def jit_kernels(source: str) -> set[str]:
    """Names of the module-level `@triton.jit` functions named `*_kernel` (the launchable ones;
    the compile test's naming rule), found in the source without importing it."""
    found = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef) and node.name.endswith("_kernel"):
            for deco in node.decorator_list:
                target = deco.func if isinstance(deco, ast.Call) else deco
                if isinstance(target, ast.Attribute) and target.attr == "jit":
                    found.add(node.name)
    return found


def inventory() -> dict[str, str]:
    """kernel name -> the triton_impl module defining it, over specreg/ and plugins/."""
    kernels = {}
    for path in [*ROOT.glob("specreg/**/triton_impl.py"), *ROOT.glob("plugins/**/triton_impl.py")]:
        for name in jit_kernels(path.read_text(encoding="utf-8")):
            kernels[name] = str(path.relative_to(ROOT))
    return kernels


def _entries_module():
    if "bench_kernels_gpu" in sys.modules:
        return sys.modules["bench_kernels_gpu"]
    spec = importlib.util.spec_from_file_location("bench_kernels_gpu", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # its dataclasses look their module up
    spec.loader.exec_module(module)
    return module


def test_the_scan_finds_kernels_and_only_kernels():
    planted = (
        "import triton\n"
        "if triton is not None:\n"
        "    @triton.jit\n"
        "    def _new_family_kernel(x_ptr):\n        pass\n"
        "    @triton.jit\n"
        "    def helper_tile(x_ptr):\n        pass\n"
        "    @triton.jit(do_not_specialize=['n'])\n"
        "    def _other_kernel(x_ptr, n):\n        pass\n"
        "def _plain_kernel():\n    pass\n"
    )
    assert jit_kernels(planted) == {"_new_family_kernel", "_other_kernel"}


def test_every_triton_kernel_has_a_gpu_benchmark_entry():
    kernels = inventory()
    assert len(kernels) >= 16, kernels  # the scan sees the kernels the compile test compiles
    covered = _entries_module().covered_kernels()
    missing = {name: where for name, where in kernels.items() if name not in covered}
    assert not missing, (
        f"Triton kernels without an entry in benchmarks/gpu/bench_kernels_gpu.py ENTRIES: "
        f"{missing}")
    assert covered <= set(kernels), covered - set(kernels)  # no entry names a kernel gone


def test_dry_run_runs_every_entry_and_launches_what_it_claims():
    done = subprocess.run([sys.executable, str(SCRIPT), "--dry-run"], cwd=ROOT,
                          capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    module = _entries_module()
    launched = {family: set(names.split(", ")) for family, names in
                re.findall(r"^KERNELS (\w+): (.+)$", done.stdout, flags=re.MULTILINE)}
    assert launched == {e.family: set(e.kernels) for e in module.ENTRIES}, launched
    assert f"{len(module.ENTRIES)}/{len(module.ENTRIES)} kernel families ran" in done.stdout
    assert set().union(*launched.values()) >= set(inventory())
