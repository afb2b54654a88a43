"""The per-request sampling parameters of a batch (`SamplingParams`): the value and its checks.

`SamplingParams` holds one value per request (tensors [b] on the batch's device):

- `temperature` float32, >= 0; 0 makes the request greedy (the target's argmax, no coins used);
- `top_k` int64 in [0, V]; 0 (or V) keeps every token;
- `top_p` float32 in (0, 1]; 1 keeps every token;
- `min_p` float32 in [0, 1]; 0 keeps every token;
- `seed` int64, >= 0 for a seeded request, -1 for one drawn from the caller's generator.

The filtering rule applied to these values is in `specreg.kernels.filtering` (docs: Kernels).
Checks read tensor data, so they run on the CPU path (a coded error naming every bad request at
once) and, on GPU, only with `check_values=True`; otherwise `invalid_rows` flags bad requests
without a host synchronisation and the verifiers never accept a draft for them. The coins of a
batch come from `specreg.kernels.sampling.request_coins`; `mixed_demo_params` builds the mixed
batch of `specreg demo` and the benchmarks.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import torch

from specreg.errors import KernelInputError, Problem, problem
from specreg.kernels.checks import check_dtype, check_tensor

ParamValue = float | int | Sequence[float] | Sequence[int] | torch.Tensor

#: `seed` value of a request whose coins come from the caller's generator (or torch.rand).
UNSEEDED = -1


@attrs.frozen(kw_only=True)
class SamplingParams:
    """Per-request sampling parameters of one batch (see the module docstring)."""

    temperature: torch.Tensor
    top_k: torch.Tensor
    top_p: torch.Tensor
    min_p: torch.Tensor
    seed: torch.Tensor

    @classmethod
    def of(
        cls,
        batch: int,
        *,
        temperature: ParamValue,
        top_k: ParamValue = 0,
        top_p: ParamValue = 1.0,
        min_p: ParamValue = 0.0,
        seed: ParamValue | None = None,
        device: torch.device | str = "cpu",
    ) -> SamplingParams:
        """Build from scalars (the same for every request), sequences or tensors of length
        `batch`. Values are stored as given; `validate` (run by every verifier) checks them."""

        def column(value: ParamValue | None, default: float, dtype: torch.dtype) -> torch.Tensor:
            if value is None:
                value = default
            if isinstance(value, torch.Tensor):
                return value.to(device=device, dtype=dtype)
            if isinstance(value, (int, float)):
                return torch.full((batch,), value, dtype=dtype, device=device)
            return torch.tensor(list(value), dtype=dtype, device=device)

        return cls(
            temperature=column(temperature, 0.0, torch.float32),
            top_k=column(top_k, 0, torch.int64),
            top_p=column(top_p, 1.0, torch.float32),
            min_p=column(min_p, 0.0, torch.float32),
            seed=column(seed, UNSEEDED, torch.int64),
        )

    @property
    def batch_size(self) -> int:
        return int(self.temperature.shape[0])

    @property
    def greedy(self) -> torch.Tensor:
        """bool [b]: requests verified greedily (temperature 0)."""
        return self.temperature == 0

    def select(self, index: torch.Tensor) -> SamplingParams:
        """The parameters of the requests at `index` (int64 [k]), in that order."""
        return SamplingParams(
            **{name: getattr(self, name).index_select(0, index) for name in _FIELDS}
        )

    def invalid_rows(self, vocab: int) -> torch.Tensor:
        """bool [b]: requests with a value outside its range (NaN and inf included). Pure tensor
        ops: no host synchronisation, usable as the GPU per-request error flag."""
        bad = torch.zeros_like(self.temperature, dtype=torch.bool)
        for rule in RANGE_RULES:
            bad |= rule.invalid(getattr(self, rule.name), vocab)
        return bad

    def validate(self, batch: int, vocab: int, device: torch.device, *, values: bool) -> None:
        """Shapes, dtypes and device always; with `values`, every range (reads the data).
        Raises one `KernelInputError` listing every problem found."""
        for name in _FIELDS:
            tensor = check_tensor(f"params.{name}", getattr(self, name))
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
            check_dtype(f"params.{name}", tensor, _DTYPES[name])
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
            problems = self._range_problems(vocab)
            if problems:
                raise KernelInputError(problems)

    def _range_problems(self, vocab: int) -> list[Problem]:
        problems = []
        for rule in RANGE_RULES:
            values = getattr(self, rule.name)
            rows = rule.invalid(values, vocab).nonzero().flatten().tolist()
            if rows:
                shown = values[rows[:4]].tolist()
                problems.append(
                    problem(
                        rule.code,
                        f"params.{rule.name} is invalid for request(s) {rows[:8]}"
                        f"{' ...' if len(rows) > 8 else ''} (values {shown}"
                        f"{' ...' if len(rows) > 4 else ''})",
                        accepted=rule.accepted.format(vocab=vocab),
                        fix=rule.fix,
                        field=f"params.{rule.name}",
                    )
                )
        return problems


@attrs.frozen
class RangeRule:
    """The range of one parameter: its error code, the mask of requests outside it, and the
    words of its error (`accepted` may name `{vocab}`)."""

    name: str
    code: str
    invalid: Callable[[torch.Tensor, int], torch.Tensor]
    accepted: str
    fix: str


def _not_finite_or(bad: torch.Tensor, values: torch.Tensor) -> torch.Tensor:
    return ~torch.isfinite(values) | bad


#: Each parameter's range, read by both `invalid_rows` (the GPU flag) and `validate` (the error).
RANGE_RULES: tuple[RangeRule, ...] = (
    RangeRule(
        "temperature", "SR911", lambda t, vocab: _not_finite_or(t < 0, t),
        "a finite temperature >= 0 (0 = greedy)",
        "pass temperature 0 for greedy requests and a positive value otherwise",
    ),
    RangeRule(
        "top_k", "SR912", lambda k, vocab: (k < 0) | (k > vocab),
        "an integer in [0, {vocab}] (0 or {vocab} = no top-k)",
        "pass top_k=0 to disable top-k; clamp larger values to the vocab size",
    ),
    RangeRule(
        "top_p", "SR913", lambda p, vocab: _not_finite_or((p <= 0) | (p > 1), p),
        "a value in (0, 1] (1 = no top-p)", "pass top_p=1.0 to disable top-p",
    ),
    RangeRule(
        "min_p", "SR914", lambda m, vocab: _not_finite_or((m < 0) | (m > 1), m),
        "a value in [0, 1] (0 = no min-p)", "pass min_p=0.0 to disable min-p",
    ),
    RangeRule(
        "seed", "SR915", lambda s, vocab: s < UNSEEDED,
        "an integer >= 0, or -1 for an unseeded request", "pass seed=-1 for no seed",
    ),
)
_FIELDS = ("temperature", "top_k", "top_p", "min_p", "seed")
_DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "temperature": (torch.float32,),
    "top_k": (torch.int64,),
    "top_p": (torch.float32,),
    "min_p": (torch.float32,),
    "seed": (torch.int64,),
}


def require_params(params: object) -> None:
    """SR910 unless `params` is a `SamplingParams`."""
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


#: The request kinds `mixed_demo_params` cycles through: request r has kind r % len(...).
MIXED_DEMO_KINDS: tuple[dict[str, float], ...] = (
    dict(temperature=0.0),
    dict(temperature=0.7),
    dict(temperature=1.0, top_k=20),
    dict(temperature=0.8, top_p=0.9),
    dict(temperature=1.3, min_p=0.1),
    dict(temperature=0.6, top_k=50, top_p=0.95, min_p=0.05),
)


def mixed_demo_params(batch: int, *, device: torch.device | str = "cpu") -> SamplingParams:
    """A batch cycling through greedy, plain temperature, top-k, top-p and min-p requests with
    per-request seeds: the mixed-parameter row of `specreg demo` and of the benchmarks."""
    kinds = MIXED_DEMO_KINDS
    rows = [kinds[r % len(kinds)] for r in range(batch)]
    return SamplingParams.of(
        batch,
        temperature=[row.get("temperature", 0.0) for row in rows],
        top_k=[int(row.get("top_k", 0)) for row in rows],
        top_p=[row.get("top_p", 1.0) for row in rows],
        min_p=[row.get("min_p", 0.0) for row in rows],
        seed=list(range(batch)),
        device=device,
    )
