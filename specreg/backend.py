"""Which implementation a kernel wrapper runs: torch (CPU path and oracle) or Triton (GPU path).

`SPECREG_KERNEL_BACKEND` = `auto` (default) | `torch` | `triton`. `auto` picks Triton for CUDA
tensors when triton is installed, torch otherwise. Forcing `triton` on CPU tensors works only
under Triton's interpreter (`TRITON_INTERPRET=1`, set before triton is imported). Nothing here
imports torch or triton at module import.
"""

from __future__ import annotations

import importlib.util
import os
from functools import lru_cache
from typing import TYPE_CHECKING, Literal

from specreg.errors import KernelInputError, problem

if TYPE_CHECKING:
    import torch

Backend = Literal["torch", "triton"]
BACKEND_ENV = "SPECREG_KERNEL_BACKEND"
#: What SPECREG_KERNEL_BACKEND, a kernel's `backend=` and a plan's `kernel_backend` accept.
BACKEND_CHOICES = ("auto", "torch", "triton")


@lru_cache(maxsize=1)
def triton_available() -> bool:
    """True when the triton package can be imported."""
    return importlib.util.find_spec("triton") is not None


def triton_interpreting() -> bool:
    return os.environ.get("TRITON_INTERPRET", "0") not in ("", "0")


def requested_backend() -> str:
    """The backend asked for through SPECREG_KERNEL_BACKEND (validated)."""
    value = os.environ.get(BACKEND_ENV, "auto").strip().lower() or "auto"
    return _checked(value, BACKEND_ENV, f"set {BACKEND_ENV} to one of them, or unset it")


def _checked(value: object, field: str, fix: str) -> str:
    if value not in BACKEND_CHOICES:
        raise KernelInputError(
            problem(
                "SR116",
                f"{field}={value!r} is not a kernel backend",
                accepted=", ".join(BACKEND_CHOICES),
                fix=fix,
                field=field,
            )
        )
    return str(value)


def backend_for_device(device_type: str, requested: str | None = None) -> Backend:
    """The backend a kernel uses for tensors on `device_type` ('cpu', 'cuda', ...).

    `requested` is 'auto', 'torch' or 'triton' (a kernel's `backend=` argument, or the value a
    plan fixed at resolve time); None reads SPECREG_KERNEL_BACKEND. Every bad choice is SR116.
    """
    source = BACKEND_ENV if requested is None else "backend"
    if requested is None:
        requested = requested_backend()
    else:
        requested = _checked(requested, source, "pass backend=None (automatic), 'torch' or 'triton'")
    if requested == "torch":
        return "torch"
    if requested == "triton":
        if not triton_available():
            raise KernelInputError(
                problem(
                    "SR116",
                    f"{source}=triton but triton is not installed",
                    accepted="auto, torch, or triton with the triton package installed",
                    fix="pip install 'specreg[triton]', or set the backend to torch",
                    field=source,
                )
            )
        if device_type != "cuda" and not triton_interpreting():
            raise KernelInputError(
                problem(
                    "SR116",
                    f"{source}=triton but the tensors are on '{device_type}', and Triton runs "
                    "only on CUDA tensors or under TRITON_INTERPRET=1",
                    accepted="CUDA tensors, or CPU tensors with TRITON_INTERPRET=1",
                    fix="move the tensors to CUDA, set TRITON_INTERPRET=1 before importing "
                    "triton, or use SPECREG_KERNEL_BACKEND=torch",
                    field=source,
                )
            )
        return "triton"
    return "triton" if device_type == "cuda" and triton_available() else "torch"


def select_backend(*tensors: torch.Tensor, requested: str | None = None) -> Backend:
    """The backend for a kernel call on `tensors` (the first tensor's device decides).

    `requested` as in `backend_for_device`: a wrapper passes its `backend=` argument through.
    """
    device_type = tensors[0].device.type if tensors else "cpu"
    return backend_for_device(device_type, requested)
