"""Checks a batch's `SamplingParams` before a kernel reads them: type, shapes, dtypes, device, ranges.

Shapes, dtypes and device are checked always; the ranges (SR911-SR915, which read the data) only
with `values`, so a GPU launch without value checks needs no host synchronisation.
"""

from __future__ import annotations

import torch

from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import check_dtype, check_tensor
from specreg.sampling_params import DTYPES, FIELDS, SamplingParams


def check_params(
    params: object, batch: int, vocab: int, device: torch.device, *, values: bool
) -> SamplingParams:
    """`params` as a `SamplingParams` of `batch` requests on `device`; raises one
    `KernelInputError` (SR910, SR902, SR911-SR915) naming what is wrong."""
    if not isinstance(params, SamplingParams):
        raise KernelInputError(
            problem(
                "SR910",
                f"params must be a SamplingParams, got {type(params).__name__}",
                accepted="specreg.sampling_params.SamplingParams",
                fix="build it with SamplingParams.of(batch, temperature=..., ...)",
                field="params",
            )
        )
    for name in FIELDS:
        tensor = check_tensor(f"params.{name}", getattr(params, name))
        if tensor.dim() != 1 or tensor.shape[0] != batch:
            raise KernelInputError(
                problem(
                    "SR910",
                    f"params.{name} has shape {list(tensor.shape)} but the batch has "
                    f"{batch} requests",
                    accepted=f"one value per request: shape [{batch}]",
                    fix="build the parameters for exactly the requests of this batch, in "
                    "batch order (SamplingParams.of(batch, ...) or params.select(index))",
                    field=f"params.{name}",
                )
            )
        check_dtype(f"params.{name}", tensor, DTYPES[name])
        if tensor.device != device:
            raise KernelInputError(
                problem(
                    "SR902",
                    f"params.{name} is on {tensor.device} but the batch is on {device}",
                    accepted=f"parameters on {device}",
                    fix=f"build the parameters with device={str(device)!r}",
                    field=f"params.{name}",
                )
            )
    if values:
        problems = params.range_problems(vocab)
        if problems:
            raise KernelInputError(problems)
    return params
