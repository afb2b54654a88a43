"""Input validation for kernel wrappers: shapes, dtypes, devices, index ranges, values.

Every check raises `KernelInputError` with a catalog code before any kernel launches. Checks that
read tensor data (index ranges, probability values) synchronise with the device; wrappers run them
always on the CPU path and, on GPU, only when asked (`check_values=True`). `check_params` checks
a batch's `SamplingParams` the same way (type, shapes, dtypes and device always; ranges with
`values`), `check_draft_lengths` a batch's per-request draft lengths (`specreg.step.draft_lengths`)
against the most a call verifies.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import torch

from specreg.errors import KernelInputError, Problem, problem
from specreg.integers import is_int
from specreg.contract.sampling_params import DTYPES, FIELDS, SamplingParams

INDEX_DTYPES = (torch.int32, torch.int64)
FLOAT_DTYPES = (torch.float16, torch.bfloat16, torch.float32, torch.float64)


def _dtype_names(dtypes: Sequence[torch.dtype]) -> str:
    return ", ".join(str(d).replace("torch.", "") for d in dtypes)


def check_tensor(name: str, value: object) -> torch.Tensor:
    if not isinstance(value, torch.Tensor):
        raise KernelInputError(
            problem(
                "SR901",
                f"{name} must be a torch.Tensor, got {type(value).__name__}",
                accepted="torch.Tensor",
                fix=f"pass {name} as a tensor",
                field=name,
            )
        )
    return value


def check_shape(name: str, tensor: torch.Tensor, expected: Sequence[int | None]) -> None:
    """`expected` lists each dimension's size; None means any size."""
    check_tensor(name, tensor)
    shape = tuple(tensor.shape)
    ok = len(shape) == len(expected) and all(
        want is None or have == want for have, want in zip(shape, expected, strict=False)
    )
    if not ok:
        want_text = "[" + ", ".join("*" if w is None else str(w) for w in expected) + "]"
        raise KernelInputError(
            problem(
                "SR900",
                f"{name} has shape {list(shape)}, expected {want_text}",
                accepted=f"shape {want_text}",
                fix=f"pass {name} with the shape its contract requires",
                field=name,
            )
        )


def check_dtype(name: str, tensor: torch.Tensor, allowed: Sequence[torch.dtype]) -> None:
    check_tensor(name, tensor)
    if tensor.dtype not in allowed:
        raise KernelInputError(
            problem(
                "SR901",
                f"{name} has dtype {str(tensor.dtype).replace('torch.', '')}",
                accepted=_dtype_names(allowed),
                fix=f"cast {name} with .to(torch.{_dtype_names([_preferred(allowed)])})",
                field=name,
            )
        )


def _preferred(allowed: Sequence[torch.dtype]) -> torch.dtype:
    """The dtype a fix names: int64 where it is accepted (the contracts' index dtype, token
    ids and lengths), else the first accepted."""
    return torch.int64 if torch.int64 in allowed else allowed[0]


def check_same_device(**tensors: torch.Tensor | None) -> torch.device:
    present = {k: v for k, v in tensors.items() if v is not None}
    devices = {k: v.device for k, v in present.items()}
    first_name, first = next(iter(devices.items()))
    for name, device in devices.items():
        if device != first:
            raise KernelInputError(
                problem(
                    "SR902",
                    f"{name} is on {device} but {first_name} is on {first}",
                    accepted=f"every input on {first}",
                    fix=f"move {name} to {first}",
                    field=name,
                )
            )
    if first.type == "meta":
        raise KernelInputError(
            problem(
                "SR902",
                f"{first_name} is on the meta device, which holds shapes but no values: no token "
                "can be computed from it",
                accepted="tensors with data (cpu, cuda, ...)",
                fix=f"materialise {first_name} on a real device (e.g. .to('cpu')) before verifying",
                field=first_name,
            )
        )
    return first


def check_index_range(
    name: str,
    tensor: torch.Tensor,
    low: int,
    high: int,
    *,
    allow: Sequence[int] = (),
) -> None:
    """Every element must lie in [low, high) or be one of `allow` (e.g. -1 padding)."""
    if tensor.numel() == 0:
        return
    bounds = torch.iinfo(tensor.dtype) if not tensor.dtype.is_floating_point else None
    # A bound outside the dtype's range holds for every element; compared as a tensor scalar
    # it would wrap (int32 against 2**62 reads 0) and refuse valid values.
    bad = torch.zeros(tensor.shape, dtype=torch.bool, device=tensor.device)
    if bounds is None or low > bounds.min:
        bad |= tensor < low
    if bounds is None or high <= bounds.max:
        bad |= tensor >= high
    for value in allow:
        bad &= tensor != value
    if bool(bad.any()):
        first_bad = int(tensor[bad].flatten()[0])
        where = [int(i) for i in bad.nonzero()[0]]
        extra = f" or {', '.join(map(str, allow))}" if allow else ""
        raise KernelInputError(
            problem(
                "SR903",
                f"{name} holds {first_bad} at index {where}, outside [{low}, {high})",
                accepted=f"values in [{low}, {high}){extra}",
                fix=f"check the producer of {name}",
                field=name,
            )
        )


def check_probabilities(
    name: str, tensor: torch.Tensor, *, allow_zero_rows: bool = False
) -> torch.Tensor:
    """The float32 row sums (last dim) of `tensor`, after checking its values are finite and
    >= 0 and, unless allowed, that every row has positive mass.

    Two reading passes and no copies: NaN or inf anywhere makes its row's sum non-finite, and the
    minimum finds negative values. (A row of finite values whose float32 sum overflows is
    reported as infinite.)
    """
    mass = tensor.sum(-1, dtype=torch.float32)
    if tensor.numel() == 0:
        return mass
    if not bool(torch.isfinite(mass).all()) or bool(tensor.amin() < 0):
        raise KernelInputError(
            problem(
                "SR904",
                f"{name} holds NaN, infinite or negative probabilities",
                accepted="finite values >= 0",
                fix="compute probabilities with torch.softmax in float32 from finite logits",
                field=name,
            )
        )
    if not allow_zero_rows and bool((mass <= 0).any()):
        raise KernelInputError(
            problem(
                "SR904",
                f"{name} has a row whose probabilities sum to zero",
                accepted="rows with positive total mass",
                fix="check the temperature and the top-k/top-p filtering that produced the row",
                field=name,
            )
        )
    return mass


def should_check_values(device: torch.device, check_values: bool | None) -> bool:
    """Data-reading checks: always on CPU, opt-in on accelerators (they synchronise)."""
    if check_values is not None:
        return check_values
    return device.type == "cpu"


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
                accepted="specreg.contract.sampling_params.SamplingParams",
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


#: The keyword every drafter and verifier takes (`specreg.step.draft_lengths`).
DRAFT_LENGTHS_FIELD = "draft_lengths"

#: How a user raises the plan's maximum, in each framework's terms.
RAISE_MAXIMUM = (
    "or raise the plan's maximum (SGLang and the specreg CLI: --speculative-num-steps / "
    "--speculative-num-draft-tokens; vLLM: --speculative-config num_speculative_tokens)"
)


def bad_draft_lengths(message: str, accepted: str, fix: str) -> KernelInputError:
    """SR922: `draft_lengths` of the wrong type, shape, dtype or device, or given twice."""
    return KernelInputError(
        problem("SR922", message, accepted=accepted, fix=fix, field=DRAFT_LENGTHS_FIELD)
    )


def length_problems(values: Sequence[int], maximum: int, *, what: str) -> list[Problem]:
    """One SR921 problem per request whose length lies outside [0, maximum]."""
    out = []
    for r, length in enumerate(values):
        if 0 <= length <= maximum:
            continue
        if length < 0:
            message = f"request {r} asks for {length} drafts; a draft length is at least 0"
            fix = f"pass 0 to opt request {r} out of speculation"
        else:
            message = (
                f"request {r} asks for {length} drafts, above the maximum of {maximum} that "
                f"{what} verifies"
            )
            fix = f"cap request {r}'s draft length at {maximum} (min(length, {maximum})), " + (
                RAISE_MAXIMUM
            )
        out.append(
            problem(
                "SR921", message,
                accepted=f"an int in [0, {maximum}] per request (0 = no speculation)",
                fix=fix, field=f"{DRAFT_LENGTHS_FIELD}[{r}]",
            )
        )
    return out


def check_draft_lengths(
    draft_lengths: Any,
    batch: int,
    maximum: int,
    *,
    device: torch.device | str,
    check_values: bool | None = None,
    what: str = "this call",
) -> torch.Tensor:
    """`draft_lengths` as int64 [batch] on `device`, within [0, maximum]
    (`specreg.step.draft_lengths` states the rule).

    `what` names the verify in the message (e.g. "the chain of 5 tokens"). SR922 for a value
    that is not a sequence of ints or an integer tensor [batch] on `device`; SR921 per request
    outside [0, maximum], every one at once."""
    device = torch.device(device)
    accepted = f"a sequence of {batch} ints, or an int32/int64 tensor [{batch}] on {device}"
    if isinstance(draft_lengths, torch.Tensor):
        if tuple(draft_lengths.shape) != (batch,):
            raise bad_draft_lengths(
                f"draft_lengths has shape {list(draft_lengths.shape)}, not [{batch}] (one length "
                "per request)", accepted, "pass one draft length per request of the batch",
            )
        if draft_lengths.dtype not in INDEX_DTYPES:
            raise bad_draft_lengths(
                f"draft_lengths has dtype {str(draft_lengths.dtype).replace('torch.', '')}",
                accepted, "cast it with .to(torch.int64)",
            )
        if draft_lengths.device != device:
            raise bad_draft_lengths(
                f"draft_lengths is on {draft_lengths.device}, the verified tensors on {device}",
                accepted, f"move draft_lengths to {device}",
            )
        lengths = draft_lengths.to(torch.int64)
        if should_check_values(device, check_values):
            found = length_problems(lengths.tolist(), maximum, what=what)
            if found:
                raise KernelInputError(found)
        return lengths.clamp(0, maximum)  # unchecked accelerator values: never out of range
    if isinstance(draft_lengths, (str, bytes)) or not isinstance(draft_lengths, Sequence):
        raise bad_draft_lengths(
            f"draft_lengths is a {type(draft_lengths).__name__}", accepted,
            "pass a list of ints or an integer tensor",
        )
    values = list(draft_lengths)
    wrong = [r for r, v in enumerate(values) if not is_int(v)]
    if wrong or len(values) != batch:
        message = (
            f"draft_lengths has {len(values)} entries for a batch of {batch}"
            if not wrong
            else f"draft_lengths holds non-integers at requests {wrong}"
        )
        raise bad_draft_lengths(message, accepted, "pass one int per request of the batch")
    found = length_problems(values, maximum, what=what)
    if found:
        raise KernelInputError(found)
    return torch.tensor(values, dtype=torch.int64, device=device)
