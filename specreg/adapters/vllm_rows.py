"""Which request each row of a vLLM `custom_class` batch holds, told from the rows' tokens alone.

vLLM's custom_class seam calls `propose(sampled_token_ids, num_tokens_no_spec, token_ids_cpu)`
with no request ids. Its persistent batch writes a new request's prompt over the row a finished
one left (the old tokens past it stay), and moves the highest rows down into freed ones when
requests leave (`InputBatch.condense`). What does identify a request is its text: a row's
tokens before this step's sampled ones are exactly what its request held when it was last seen.
So a row continues a request exactly when those tokens equal all of the request's tokens
(compared in full: a new request may share any prefix with the old one, its first token in
particular), and otherwise holds a new request whose prompt they are, its response starting
with the sampled tokens. Among requests holding the same tokens (several samples of one prompt),
the one last seen in this row is taken first, then the oldest. A row that sampled nothing (a
prefill) continues a request whose tokens it holds, and opens none. A request that no row
continues has left the batch.

The one case the tokens cannot tell: a new request whose prompt equals every token of a request
that was in the batch at the previous call and is not any more is taken for that request's
continuation (its response then follows the old one's in a history drafter's trees).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import attrs
import numpy as np


@attrs.frozen(kw_only=True)
class RowRequest:
    """The request a row holds: its `key` (stable while it stays in the batch), whether it is
    `new` this call, and `start`: the row's tokens [start, num_tokens) are this call's sampled
    ones (a new request's prompt is [0, start))."""

    key: int
    new: bool
    start: int


@attrs.frozen(kw_only=True)
class RowAssignment:
    """One call's answer: a `RowRequest` per row (None for a row in prefill that continues no
    request), and the keys of the requests that `left` the batch."""

    rows: tuple[RowRequest | None, ...]
    left: tuple[int, ...]


class _Text:
    """A request's tokens as last seen, in a growing int32 buffer."""

    __slots__ = ("buffer", "size")

    def __init__(self, tokens: np.ndarray) -> None:
        self.buffer = np.array(tokens, dtype=np.int32, copy=True)
        self.size = len(tokens)

    def equals(self, row: np.ndarray, size: int) -> bool:
        return size == self.size and bool(np.array_equal(self.buffer[:size], row[:size]))

    def extend(self, tokens: np.ndarray) -> None:
        end = self.size + len(tokens)
        if end > len(self.buffer):
            grown = np.empty(max(end, 2 * len(self.buffer)), dtype=np.int32)
            grown[: self.size] = self.buffer[: self.size]
            self.buffer = grown
        self.buffer[self.size : end] = tokens
        self.size = end


class RowRequests:
    """The requests of one proposer's batch, call after call (see the module docstring)."""

    def __init__(self) -> None:
        self._texts: dict[int, _Text] = {}
        self._row_of: dict[int, int] = {}
        self._by_size: dict[int, dict[int, None]] = {}  # text size -> keys, oldest first
        self._next_key = 0

    def __len__(self) -> int:
        return len(self._texts)

    def assign(self, token_ids_cpu: Any, num_tokens_no_spec: Any,
               num_sampled: Sequence[int]) -> RowAssignment:
        """Row i holds token_ids_cpu[i, :num_tokens_no_spec[i]], whose last num_sampled[i]
        tokens were sampled this call; rows past len(num_sampled) are not in the batch."""
        tokens = np.asarray(token_ids_cpu)
        claimed: dict[int, None] = {}
        rows: list[RowRequest | None] = []
        for i, sampled in enumerate(num_sampled):
            size = int(num_tokens_no_spec[i])
            start = size - int(sampled)
            key = self._continued(tokens[i], start, i, claimed) if start >= 0 else None
            if key is None and (sampled == 0 or start < 0):
                rows.append(None)
                continue
            if key is None:
                row = RowRequest(key=self._next_key, new=True, start=start)
                self._next_key += 1
            else:
                row = RowRequest(key=key, new=False, start=start)
            rows.append(row)
            claimed[row.key] = None
        left = tuple(key for key in self._texts if key not in claimed)
        for key in left:
            self._forget(key)
        for i, held in enumerate(rows):
            if held is not None:
                self._record(held, tokens[i], int(num_tokens_no_spec[i]), i)
        return RowAssignment(rows=tuple(rows), left=left)

    def _continued(self, row: np.ndarray, size: int, index: int,
                   claimed: dict[int, None]) -> int | None:
        """The request whose tokens are exactly row[:size], not claimed by an earlier row."""
        keys = self._by_size.get(size)
        if not keys:
            return None
        ordered = sorted(keys, key=lambda k: self._row_of[k] != index)  # this row's first
        for key in ordered:
            if key not in claimed and self._texts[key].equals(row, size):
                return key
        return None

    def _forget(self, key: int) -> None:
        text = self._texts.pop(key)
        del self._row_of[key]
        same = self._by_size[text.size]
        del same[key]
        if not same:
            del self._by_size[text.size]

    def _record(self, row: RowRequest, tokens: np.ndarray, size: int, index: int) -> None:
        if row.new:
            self._texts[row.key] = _Text(tokens[:size])
        else:
            text = self._texts[row.key]
            same = self._by_size[text.size]
            del same[row.key]
            if not same:
                del self._by_size[text.size]
            text.extend(tokens[row.start : size])
        self._row_of[row.key] = index
        self._by_size.setdefault(size, {})[row.key] = None
