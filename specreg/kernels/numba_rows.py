"""What the compiled CPU paths share outside numba: their passes imported on first use, and how
they view the rows they read.

A family's `numba_impl` calls `compiled("<family>.numba_kernels")`, which imports numba and the
passes once per process and is None where numba does not import (the torch path runs then); it
reads float32 and bfloat16 rows as unsigned words of their width (`ROW_RAW`) and puts their
bits in a float32 (`ROW_SHIFTS`, `race_numba.as_float32`).
"""

from __future__ import annotations

import functools
import importlib
from types import ModuleType

import numpy as np
import torch

#: The row dtypes the compiled paths read: the shift that puts their bits in a float32.
ROW_SHIFTS = {torch.float32: 0, torch.bfloat16: 16}
#: The integer dtypes of the same width that torch and numpy view those rows as.
ROW_RAW = {torch.float32: (torch.int32, np.uint32), torch.bfloat16: (torch.int16, np.uint16)}


@functools.cache
def compiled(module: str) -> ModuleType | None:
    """The module of compiled passes `module`, imported on first use; None where numba (or the
    module) does not import."""
    try:
        return importlib.import_module(module)
    except ImportError:
        return None
