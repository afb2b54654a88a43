"""How the toy loop reads the KV rows its sparse attention selected.

`DenseReader` computes rows straight from the committed tokens (the reference). `SwapReader`
keeps the rows in a host cache and reads them through a KV-cache swapper's device rows, the way
a serving framework with HiSparse does; any wrong or stale row changes the logits.
"""

from __future__ import annotations

from typing import Any, Protocol

import torch

from specreg.testing.toy_model import ToyLM


class KVReader(Protocol):
    def start(self, seqs: torch.Tensor, lengths: torch.Tensor) -> None: ...

    def read(
        self,
        seqs: torch.Tensor,
        lengths: torch.Tensor,
        selected: torch.Tensor,
        context_lens: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]: ...

    def commit(self, seqs: torch.Tensor, old_lengths: torch.Tensor, new_lengths: torch.Tensor) -> None: ...

    def stats(self) -> dict[str, float]: ...


class DenseReader:
    """Rows computed from the tokens themselves: no cache at all."""

    def __init__(self, model: ToyLM) -> None:
        self.model = model

    def start(self, seqs: torch.Tensor, lengths: torch.Tensor) -> None:
        return None

    def read(
        self,
        seqs: torch.Tensor,
        lengths: torch.Tensor,
        selected: torch.Tensor,
        context_lens: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        b, n, k = selected.shape
        request = torch.arange(b).repeat_interleave(n)
        rows, valid = self.model.dense_rows(seqs, request, selected.reshape(b * n, k))
        return rows.reshape(b, n, k, -1), valid.reshape(b, n, k)

    def commit(self, seqs: torch.Tensor, old_lengths: torch.Tensor, new_lengths: torch.Tensor) -> None:
        return None

    def stats(self) -> dict[str, float]:
        return {}


class SwapReader:
    """Rows read through a KV-cache swapper (HiSparse): host cache + device rows.

    The swapper owns the host cache, the host locations and the device buffer; this reader
    writes each committed token's row to the host cache, asks the swapper for device rows of
    the selected positions, and reads those device rows.
    """

    def __init__(self, swapper: Any, model: ToyLM) -> None:
        self.swapper = swapper
        self.model = model
        self._hits = self._misses = self._bytes = 0
        self._calls = 0

    def start(self, seqs: torch.Tensor, lengths: torch.Tensor) -> None:
        b = seqs.shape[0]
        self.session = self.swapper.toy_session(batch_size=b, row_elems=self.model.row_elems,
                                                max_positions=seqs.shape[1])
        self._write(seqs, torch.zeros_like(lengths), lengths)

    def _write(self, seqs: torch.Tensor, start: torch.Tensor, stop: torch.Tensor) -> None:
        width = int((stop - start).max())
        if width <= 0:
            return
        cols = torch.arange(width)[None, :]
        positions = start[:, None] + cols
        keep = positions < stop[:, None]
        req = torch.arange(seqs.shape[0])[:, None].expand_as(positions)
        pos = positions[keep]
        tokens = seqs[req[keep], pos]
        self.session.write_rows(req[keep], pos, self.model.kv_rows(tokens, pos), stop)

    def read(
        self,
        seqs: torch.Tensor,
        lengths: torch.Tensor,
        selected: torch.Tensor,
        context_lens: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        rows, valid, counters = self.session.read(selected, context_lens)
        self._calls += 1
        self._hits += int(counters["hits"])
        self._misses += int(counters["misses"])
        self._bytes += int(counters["bytes_copied"])
        return rows, valid

    def commit(self, seqs: torch.Tensor, old_lengths: torch.Tensor, new_lengths: torch.Tensor) -> None:
        self._write(seqs, old_lengths, new_lengths)

    def stats(self) -> dict[str, float]:
        total = self._hits + self._misses
        return {
            "hit_rate": self._hits / total if total else 0.0,
            "misses": float(self._misses),
            "bytes_copied": float(self._bytes),
            "swap_calls": float(self._calls),
        }
