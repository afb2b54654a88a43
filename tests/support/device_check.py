"""The check that every tensor factory call in specreg's or a built-in plugin's kernel code names
its device: the tests of `TORCH_PATH_TESTS` run under it in every run (tests/conftest.py wraps
their calls), and `python -m pytest -p tests.support.device_check ...` runs a whole session
under it.

On CPU a missing `device=` is invisible (the default device is the CPU too); on CUDA it makes a
CPU tensor that the next op mixes with CUDA ones. Under this plugin, `torch.empty(n)` called from
`specreg/` or `plugins/` (the plain per-row `reference.py` oracles and the CPU-only toy models of
`specreg.testing` excepted) raises at once,
naming the file and line, so the CPU tests catch what only a GPU run would show.
"""

from __future__ import annotations

import sys
from pathlib import Path

import torch
from torch.overrides import TorchFunctionMode

ROOT = Path(__file__).resolve().parents[2]
CHECKED = (str(ROOT / "specreg") + "/", str(ROOT / "plugins") + "/")
#: CPU-only by design: the toy models and loop of specreg.testing, the demo.
EXEMPT = (str(ROOT / "specreg" / "testing") + "/", str(ROOT / "specreg" / "cli" / "demo.py"))
FACTORIES = frozenset({
    torch.empty, torch.zeros, torch.ones, torch.full, torch.arange, torch.tensor, torch.rand,
    torch.randn, torch.randint, torch.linspace, torch.eye, torch.empty_strided, torch.as_tensor,
    torch.randperm,
})  # fmt: skip


#: The torch implementations against their references: chain, sampling parameters, filtering,
#: the tree kernels, EAGLE's top-k, HiSparse's swap, DSpark's and lookup's kernels, CPU-tuned
#: and batched branches. Their Triton cases (a "triton" in the test id) are not checked: the
#: interpreter builds its own CPU tensors.
TORCH_PATH_TESTS = (
    "tests/kernels/test_kernel_references.py",
    "tests/kernels/test_tree_references.py",
    "tests/eagle/test_reference.py",
    "tests/hisparse/test_reference.py",
    "tests/dspark/test_reference.py",
    "tests/lookup/test_kernels.py",
    "tests/kernels/test_logprobs.py",
    "tests/kernels/test_grammar_masks.py::test_bitmask_kernel_equals_reference",
    "tests/kernels/test_grammar_masks.py::test_bad_masks_are_coded",
    "tests/kernels/test_penalties.py::test_torch_and_triton_equal_the_reference",
    "tests/kernels/test_filtering_pivot.py::test_pivot_prefix_is_the_sorted_row_down_to_the_pivot",
    "tests/kernels/test_filtering_pivot.py::test_ties_at_the_pivot_past_the_ranked_columns_are_all_kept",
)


def checks(nodeid: str) -> bool:
    """Whether the test `nodeid` runs under `DeviceNamed` (one of `TORCH_PATH_TESTS`, not a
    Triton case)."""
    inside = any(nodeid == path or nodeid.startswith((path + "::", path + "["))
                 for path in TORCH_PATH_TESTS)
    return inside and "triton" not in nodeid.lower()


class DeviceNamed(TorchFunctionMode):
    """Raises on a factory call without `device=` from the checked source."""

    def __torch_function__(self, func, types, args=(), kwargs=None):
        kwargs = kwargs or {}
        if func in FACTORIES and kwargs.get("device") is None:
            caller = sys._getframe(1)
            where = caller.f_code.co_filename
            if (where.startswith(CHECKED) and not where.startswith(EXEMPT)
                    and not where.endswith("reference.py")):
                raise AssertionError(
                    f"{func.__name__}() without device= at "
                    f"{Path(where).relative_to(ROOT)}:{caller.f_lineno}"
                )
        return func(*args, **kwargs)


_MODE = DeviceNamed()


def pytest_sessionstart(session):
    _MODE.__enter__()


def pytest_sessionfinish(session, exitstatus):
    _MODE.__exit__(None, None, None)
