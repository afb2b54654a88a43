"""Acceptance statistics: what verification accepted, per request and per draft position.

`AcceptanceStats.record(result)` takes any verifier's result (`specreg.contract.protocols.VerifyResult`,
or anything with `num_accepted` int [b] and `output_tokens` [b, D]) and adds it to histograms that
stay on the result's device: recording costs two small scatter-adds and never synchronises the
device, so a serving loop can record every step. `snapshot()` reads the histograms once (one
copy to the host) into an `AcceptanceSnapshot` of plain numbers: per-position acceptance rates,
mean accepted length and the draft, accepted and emitted token counts.
`specreg.step.acceptance_export` exports the same numbers in Prometheus' text format.

Position i (0-based) is the i-th draft token of a request's path; a request that proposed L drafts
contributes to positions 0..L-1, and position i is accepted when `num_accepted > i`. Requests with
per-request draft lengths pass `num_drafts` (int [b]); by default every request proposed D - 1.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs

if TYPE_CHECKING:
    import torch


@attrs.frozen
class AcceptanceSnapshot:
    """Acceptance so far, as plain numbers.

    - `verify_steps`: verify calls recorded; `request_steps`: request rows verified over them.
    - `draft_tokens`, `accepted_tokens`, `emitted_tokens` (accepted + one bonus per request step).
    - `position_drafts[i]`, `position_accepted[i]`: drafts proposed / accepted at position i.
    - `per_request`: request id -> (request steps, drafts, accepted), for ids given to `record`.
    """

    verify_steps: int
    request_steps: int
    draft_tokens: int
    accepted_tokens: int
    emitted_tokens: int
    position_drafts: tuple[int, ...]
    position_accepted: tuple[int, ...]
    per_request: dict[Any, tuple[int, int, int]] = attrs.field(factory=dict)

    @property
    def acceptance_rate(self) -> float:
        """Accepted drafts / proposed drafts (0 when nothing was proposed)."""
        return self.accepted_tokens / self.draft_tokens if self.draft_tokens else 0.0

    @property
    def mean_accepted_length(self) -> float:
        """Tokens emitted per request step (accepted drafts + the bonus): the speed-up bound."""
        return self.emitted_tokens / self.request_steps if self.request_steps else 0.0

    @property
    def position_rates(self) -> tuple[float, ...]:
        """Per position: accepted / proposed there (0 where nothing was proposed)."""
        return tuple(a / d if d else 0.0 for a, d in zip(self.position_accepted, self.position_drafts, strict=True))

    @property
    def conditional_rates(self) -> tuple[float, ...]:
        """Per position: accepted there / accepted at the previous position (the chance of going
        on, given the path got this far; position 0 against the requests that proposed it)."""
        out = []
        previous = self.position_drafts[0] if self.position_drafts else 0
        for accepted in self.position_accepted:
            out.append(accepted / previous if previous else 0.0)
            previous = accepted
        return tuple(out)

    def to_dict(self) -> dict[str, Any]:
        return {
            "verify_steps": self.verify_steps, "request_steps": self.request_steps,
            "draft_tokens": self.draft_tokens, "accepted_tokens": self.accepted_tokens,
            "emitted_tokens": self.emitted_tokens, "acceptance_rate": self.acceptance_rate,
            "mean_accepted_length": self.mean_accepted_length,
            "position_drafts": list(self.position_drafts),
            "position_accepted": list(self.position_accepted),
            "position_rates": list(self.position_rates),
        }


@attrs.define
class AcceptanceStats:
    """Accumulates verify results; `snapshot()` reads them. Not thread-safe: one per loop."""

    _accepted: Any = None  # int64 [P + 1] on the results' device: request steps by accepted count
    _drafts: Any = None  # int64 [P + 1]: request steps by drafts proposed
    verify_steps: int = 0
    _per_request: dict[Any, list[int]] = attrs.field(factory=dict)

    def record(
        self, result: Any, num_drafts: int | torch.Tensor | None = None,
        request_ids: Sequence[Any] | None = None, *, check_values: bool | None = None,
    ) -> None:
        """Add one verify result. `num_drafts`: drafts each request proposed (int, or int [b]);
        default D - 1. Rows a result marks in `param_error` (refused parameters: nothing emitted)
        are not counted. See `record_counts` for `request_ids` and `check_values`."""
        import torch

        accepted = _num_accepted(result)
        slots = int(result.output_tokens.shape[1])
        error = getattr(result, "param_error", None)
        counted = None if error is None else ~error.to(device=accepted.device, dtype=torch.bool)
        self.record_counts(
            accepted, slots - 1 if num_drafts is None else num_drafts, request_ids,
            counted=counted, max_drafts=slots - 1, check_values=check_values,
        )

    def record_counts(
        self, num_accepted: torch.Tensor, num_drafts: int | torch.Tensor,
        request_ids: Sequence[Any] | None = None, *, counted: torch.Tensor | None = None,
        max_drafts: int | None = None, check_values: bool | None = None,
    ) -> None:
        """Add one step from its counts: `num_accepted` int [b] (drafts accepted, bonus not
        counted), `num_drafts` int or int [b]; `counted` bool [b] leaves rows out (finished
        requests); `max_drafts` bounds a tensor `num_drafts` (without it its maximum is read,
        one device synchronisation). `request_ids` (one per row) also keeps per-request totals,
        at the cost of one device-to-host copy. Shapes are always checked (SR132); values (no negative count,
        accepted <= drafts) when `check_values`, by default on CPU only, since checking them on
        an accelerator synchronises it."""
        import torch

        accepted = num_accepted.to(torch.int64)
        device = accepted.device
        rows = accepted.shape[0]
        if isinstance(num_drafts, int):
            drafts = torch.full((rows,), num_drafts, dtype=torch.int64, device=device)
        else:
            drafts = num_drafts.to(device=device, dtype=torch.int64)
        if check_values is None:
            check_values = device.type == "cpu"
        _check(accepted, drafts, num_drafts, request_ids, check_values, max_drafts)
        if isinstance(num_drafts, int):
            positions = num_drafts
        elif max_drafts is not None:
            positions = max_drafts
        else:
            positions = int(drafts.max()) if rows else 0  # reads the device: pass max_drafts
        self._grow(positions, device)
        top = self._accepted.shape[0] - 1
        weight = torch.ones(rows, dtype=torch.int64, device=device)
        if counted is not None:
            weight = weight * counted.to(device=device, dtype=torch.int64)
        self._accepted.scatter_add_(0, accepted.clamp(0, top), weight)
        self._drafts.scatter_add_(0, drafts.clamp(0, top), weight)
        self.verify_steps += 1
        if request_ids is not None:
            rows_of = zip(request_ids, accepted.tolist(), drafts.tolist(), weight.tolist(), strict=True)
            for rid, a, d, w in rows_of:
                if not w:
                    continue
                totals = self._per_request.setdefault(rid, [0, 0, 0])
                totals[0] += 1
                totals[1] += d
                totals[2] += a

    def _grow(self, positions: int, device: Any) -> None:
        import torch

        size = positions + 1
        if self._accepted is None:
            self._accepted = torch.zeros(size, dtype=torch.int64, device=device)
            self._drafts = torch.zeros(size, dtype=torch.int64, device=device)
        elif self._accepted.shape[0] < size:
            pad = size - self._accepted.shape[0]
            zeros = torch.zeros(pad, dtype=torch.int64, device=self._accepted.device)
            self._accepted = torch.cat([self._accepted, zeros])
            self._drafts = torch.cat([self._drafts, zeros])

    def snapshot(self) -> AcceptanceSnapshot:
        """The counts so far (one host copy of two small histograms)."""
        if self._accepted is None:
            return AcceptanceSnapshot(0, 0, 0, 0, 0, (), (), {})
        accepted = self._accepted.cpu().tolist()
        drafts = self._drafts.cpu().tolist()
        positions = len(accepted) - 1
        # a request step with count c covers positions 0..c-1: suffix sums of the histograms
        at_least = _suffix_sums(accepted)
        proposed = _suffix_sums(drafts)
        request_steps = sum(accepted)
        accepted_tokens = sum(c * n for c, n in enumerate(accepted))
        return AcceptanceSnapshot(
            verify_steps=self.verify_steps,
            request_steps=request_steps,
            draft_tokens=sum(c * n for c, n in enumerate(drafts)),
            accepted_tokens=accepted_tokens,
            emitted_tokens=accepted_tokens + request_steps,
            position_drafts=tuple(proposed[1:positions + 1]),
            position_accepted=tuple(at_least[1:positions + 1]),
            per_request={k: tuple(v) for k, v in self._per_request.items()},  # type: ignore[misc]
        )

    def reset(self) -> None:
        self._accepted = self._drafts = None
        self.verify_steps = 0
        self._per_request.clear()


def _check(
    accepted: torch.Tensor, drafts: torch.Tensor, given: Any, request_ids: Any, values: bool,
    max_drafts: int | None,
) -> None:
    from specreg.errors import KernelInputError, problem

    rows = accepted.shape[0]
    found = []
    if drafts.shape != (rows,):
        found.append(f"num_drafts has shape {tuple(drafts.shape)}, the batch {rows} rows")
    if request_ids is not None and len(request_ids) != rows:
        found.append(f"{len(request_ids)} request_ids for {rows} rows")
    if not found and values:
        if isinstance(given, int) and given < 0 or bool((drafts < 0).any()):
            found.append(f"num_drafts has a negative count: {given}")
        if max_drafts is not None and bool((drafts > max_drafts).any()):
            found.append(f"num_drafts exceeds the {max_drafts} draft slots the result has")
        bad = (accepted > drafts).nonzero().flatten().tolist()
        if bad:
            found.append(f"rows {bad[:8]} accepted more drafts than num_drafts says they proposed")
    if found:
        raise KernelInputError([
            problem("SR132", text, accepted="num_drafts: int or int [b], >= each row's accepted "
                    "count; request_ids: one per row", fix="pass the drafts each row proposed",
                    field="num_drafts")
            for text in found
        ])


def _num_accepted(result: Any) -> torch.Tensor:
    for name in ("num_accepted", "accept_len", "accept_token_num"):
        value = getattr(result, name, None)
        if value is not None:
            return value
    raise TypeError(f"{type(result).__name__} has no num_accepted / accept_len: not a verify result")


def _suffix_sums(counts: list[int]) -> list[int]:
    out = [0] * (len(counts) + 1)
    for i in range(len(counts) - 1, -1, -1):
        out[i] = out[i + 1] + counts[i]
    return out[:-1]
