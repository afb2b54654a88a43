"""A pytest plugin that fails any tensor factory call in specreg's or a built-in plugin's kernel
code that does not name its device: `python -m pytest -p tests.support.device_check ...`.

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
EXEMPT = (str(ROOT / "specreg" / "testing") + "/", str(ROOT / "specreg" / "demo.py"))
FACTORIES = frozenset({
    torch.empty, torch.zeros, torch.ones, torch.full, torch.arange, torch.tensor, torch.rand,
    torch.randn, torch.randint, torch.linspace, torch.eye, torch.empty_strided, torch.as_tensor,
    torch.randperm,
})  # fmt: skip


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
