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
without a host synchronisation and the verifiers never accept a draft for them. A batch's draws
are keyed by `specreg.kernels.sampling.request_keys` (a seeded request's key is its seed);
`specreg.kernels.checks.check_params` checks a batch before a kernel reads it; `specreg.testing.demo_params` builds the mixed batch of `specreg demo`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

import attrs
import torch

from specreg.errors import Problem, problem

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
            **{name: getattr(self, name).index_select(0, index) for name in FIELDS}
        )

    def invalid_rows(self, vocab: int) -> torch.Tensor:
        """bool [b]: requests with a value outside its range (NaN and inf included). Pure tensor
        ops: no host synchronisation, usable as the GPU per-request error flag."""
        bad = torch.zeros_like(self.temperature, dtype=torch.bool)
        for rule in RANGE_RULES:
            bad |= rule.invalid(getattr(self, rule.name), vocab)
        return bad

    def range_problems(self, vocab: int) -> list[Problem]:
        """SR911-SR915 for every request with a value outside its range (reads the data)."""
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
FIELDS = ("temperature", "top_k", "top_p", "min_p", "seed")
DTYPES: dict[str, tuple[torch.dtype, ...]] = {
    "temperature": (torch.float32,),
    "top_k": (torch.int64,),
    "top_p": (torch.float32,),
    "min_p": (torch.float32,),
    "seed": (torch.int64,),
}
