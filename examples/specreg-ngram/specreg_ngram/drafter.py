"""`NgramDrafter`, the object an ngram plan hands out: prompt-lookup drafting, batched in torch.

For each request, take the last k tokens of its history (the suffix n-gram), find the most recent
earlier occurrence of that n-gram in the history, and propose the tokens that followed it. k runs
from `max_ngram` down to `min_ngram`; the longest n-gram with a match wins, and among its matches
the most recent one. There is no draft model: drafting costs a few tensor comparisons.

Rules, precisely (L = the request's history length, gamma = num_draft_tokens - 1):

- A match of the suffix n-gram of length k is a start j with history[j:j+k] == history[L-k:L]
  and j + k <= L - 1: at least one token follows it, and it is not the suffix itself.
- The drafts copy the continuation history[j+k:], read periodically when it reaches the end of
  the history: draft i = history[j + k + (i mod (L - j - k))]. This is the overlapping copy of
  LZ77, so a repeating pattern keeps repeating ("a b a b a" drafts "b a b a ...").
- No match for any k (or a history shorter than min_ngram + 1): the fallback drafts repeat the
  last token gamma times. `NgramMatch.ngram_len` is 0 for such rows, so a loop can skip
  speculation for them; verifying them is always correct, only less likely to be accepted.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import attrs
import torch
from specreg.errors import ConfigError, KernelInputError, problem
from specreg.integers import is_int
from specreg.kernels.checks import (
    INDEX_DTYPES,
    check_dtype,
    check_index_range,
    check_same_device,
    check_shape,
    check_tensor,
    should_check_values,
)
from specreg.contract.memory import PER_REQUEST, Buffer

if TYPE_CHECKING:
    from specreg.registry.plan import SpecPlan


@attrs.frozen(kw_only=True)
class NgramMatch:
    """What `NgramDrafter.lookup` found for each request of a batch.

    `tokens` int64 [b, gamma]: the drafts. `ngram_len` int64 [b]: the length of the matched
    suffix n-gram, 0 where the fallback was used. `start` int64 [b]: the history position the
    drafts are copied from (L - 1 for the fallback).
    """

    tokens: torch.Tensor
    ngram_len: torch.Tensor
    start: torch.Tensor


class NgramDrafter:
    """Proposes `num_draft_tokens - 1` draft tokens per request by prompt lookup.

    `num_draft_tokens` is the verify width n of the plan (the anchor plus the drafts); use
    `NgramDrafter.from_plan(plan)` to take it from a resolved plan.
    """

    needs = "token_history"  # specreg.contract.protocols.DRAFTER_NEEDS

    def __init__(
        self, *, max_ngram: int = 3, min_ngram: int = 1, num_draft_tokens: int = 4
    ) -> None:
        problems = []
        for name, value, low in (
            ("max_ngram", max_ngram, 1),
            ("min_ngram", min_ngram, 1),
            ("num_draft_tokens", num_draft_tokens, 2),
        ):
            if not is_int(value):
                problems.append(
                    problem(
                        "SR104",
                        f"ngram: {name} must be an integer, got {value!r}",
                        accepted="an integer",
                        fix=f"pass {name} as an int",
                        field=name,
                    )
                )
            elif value < low:
                problems.append(
                    problem(
                        "SR103",
                        f"ngram: {name}={value} is out of range",
                        accepted=f"{name} >= {low}",
                        fix=f"set {name} to at least {low}",
                        field=name,
                    )
                )
        if not problems and min_ngram > max_ngram:
            problems.append(
                problem(
                    "SR103",
                    f"ngram: min_ngram={min_ngram} is larger than max_ngram={max_ngram}",
                    accepted="1 <= min_ngram <= max_ngram",
                    fix="lower min_ngram or raise max_ngram",
                    field="min_ngram",
                )
            )
        if problems:
            raise ConfigError(problems)
        self.max_ngram = max_ngram
        self.min_ngram = min_ngram
        self.num_draft_tokens = num_draft_tokens

    @classmethod
    def from_plan(cls, plan: SpecPlan, *, max_ngram: int = 3, min_ngram: int = 1) -> NgramDrafter:
        """A drafter proposing the plan's gamma drafts (num_draft_tokens = gamma + 1)."""
        return cls(max_ngram=max_ngram, min_ngram=min_ngram, num_draft_tokens=plan.gamma + 1)

    @property
    def gamma(self) -> int:
        """Draft tokens proposed per request and step."""
        return self.num_draft_tokens - 1

    def __repr__(self) -> str:
        return (
            f"NgramDrafter(max_ngram={self.max_ngram}, min_ngram={self.min_ngram}, "
            f"num_draft_tokens={self.num_draft_tokens})"
        )

    def memory(self) -> list[Buffer]:
        """Per request: what `lookup` returns (the drafts, the matched n-gram length and the
        copy start). The history it reads is the serving framework's."""
        return [
            Buffer(name="draft_tokens", device_bytes=self.gamma * 8, per=PER_REQUEST),
            Buffer(name="ngram_len+start", device_bytes=2 * 8, per=PER_REQUEST),
        ]

    # ------------------------------------------------------------------------------ drafting
    def propose(
        self,
        history: torch.Tensor | Sequence[torch.Tensor],
        lengths: torch.Tensor | None = None,
        *,
        check_values: bool | None = None,
    ) -> torch.Tensor:
        """Draft tokens, int64 [b, gamma]. See `lookup` for the arguments."""
        return self.lookup(history, lengths, check_values=check_values).tokens

    def lookup(
        self,
        history: torch.Tensor | Sequence[torch.Tensor],
        lengths: torch.Tensor | None = None,
        *,
        check_values: bool | None = None,
    ) -> NgramMatch:
        """Find each request's match and its drafts.

        `history` is either a list of 1-D token tensors (one per request, any lengths) or a
        padded [b, L] tensor with `lengths` [b] (default: every row is full). Each history ends
        with the request's last committed token, which becomes the anchor of the verify step.
        Lengths must lie in [1, L]; on CPU they are checked (on GPU only with
        `check_values=True`, as that check synchronises). Padding values are never read.
        """
        tokens, lengths = _as_padded(history, lengths)
        batch, width = tokens.shape
        if should_check_values(tokens.device, check_values):
            check_index_range("lengths", lengths, 1, width + 1)
        device = tokens.device
        tokens = tokens.long()
        lengths = lengths.long().clamp(1, max(width, 1))  # unchecked GPU input never reads OOB
        ngram_len = torch.zeros(batch, dtype=torch.long, device=device)
        start = lengths - 1  # the fallback: repeat the last token
        for k in range(self.max_ngram, self.min_ngram - 1, -1):
            if width < k + 1:
                continue
            windows = tokens.unfold(1, k, 1)  # [b, width - k + 1, k], a view
            suffix_at = (lengths[:, None] - k + torch.arange(k, device=device)).clamp_(min=0)
            suffix = tokens.gather(1, suffix_at)  # [b, k]
            positions = torch.arange(width - k + 1, device=device)
            continues = positions[None, :] + k <= lengths[:, None] - 1
            hits = (windows == suffix[:, None, :]).all(dim=-1) & continues
            latest = torch.where(hits, positions[None, :], -1).amax(dim=-1)  # [b]
            take = (latest >= 0) & (ngram_len == 0)
            ngram_len = torch.where(take, k, ngram_len)
            start = torch.where(take, latest + k, start)
        period = lengths - start  # >= 1: at least one token follows start
        offsets = torch.arange(self.gamma, device=device)
        index = start[:, None] + offsets[None, :] % period[:, None]
        return NgramMatch(tokens=tokens.gather(1, index), ngram_len=ngram_len, start=start)


def _as_padded(
    history: torch.Tensor | Sequence[torch.Tensor], lengths: torch.Tensor | None
) -> tuple[torch.Tensor, torch.Tensor]:
    if isinstance(history, torch.Tensor):
        check_dtype("history", history, INDEX_DTYPES)
        check_shape("history", history, (None, None))
        if lengths is None:
            lengths = torch.full(
                (history.shape[0],), history.shape[1], dtype=torch.long, device=history.device
            )
        check_tensor("lengths", lengths)
        check_dtype("lengths", lengths, INDEX_DTYPES)
        check_shape("lengths", lengths, (history.shape[0],))
        check_same_device(history=history, lengths=lengths)
        return history, lengths
    rows: list[Any] = list(history)
    if lengths is not None or not rows:
        raise KernelInputError(
            problem(
                "SR900",
                "history must be a non-empty list of 1-D tensors (without lengths) or a padded "
                f"[b, L] tensor with lengths [b]; got a list of {len(rows)} with lengths "
                f"{'given' if lengths is not None else 'unset'}",
                accepted="a non-empty list of 1-D tensors, or a padded [b, L] tensor",
                fix="drop lengths when passing a list, or pass the padded tensor",
                field="history",
            )
        )
    for i, row in enumerate(rows):
        check_tensor(f"history[{i}]", row)
        check_dtype(f"history[{i}]", row, INDEX_DTYPES)
        check_shape(f"history[{i}]", row, (None,))
    check_same_device(**{f"history[{i}]": row for i, row in enumerate(rows)})
    lengths = torch.tensor([row.numel() for row in rows], dtype=torch.long, device=rows[0].device)
    padded = torch.nn.utils.rnn.pad_sequence([row.long() for row in rows], batch_first=True)
    return padded, lengths
