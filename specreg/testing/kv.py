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


def toy_cache_options(batch_size: int, max_positions: int, model: ToyLM) -> dict[str, int]:
    """HiSparse options that fit the toy model and a batch: top_k as the model's, a hot buffer
    smaller than the contexts (so misses happen), one request slot per batch row."""
    top_k = model.config.top_k
    return {
        "top_k": top_k,
        "hot_size": 2 * top_k,
        "req_slots": batch_size,
        "max_seq_len": max_positions,
        "row_bytes": model.row_elems * 4,
    }


class SwapReader:
    """Rows read through a KV-cache swapper (HiSparse): host cache plus device rows.

    Each committed token's row is written once (to its tail row and its host row); a verify asks
    the swapper for device rows of every node's selected positions in one multi-step call and
    reads the device buffer there. Anything lost, stale or misplaced changes the logits.
    """

    def __init__(self, swapper: Any, model: ToyLM) -> None:
        self.swapper = swapper
        self.model = model
        self._hits = self._misses = self._bytes = 0
        self._calls = 0

    def start(self, seqs: torch.Tensor, lengths: torch.Tensor) -> None:
        b, capacity = seqs.shape
        layout = self.swapper.layout
        if layout.req_slots < b or layout.max_seq_len < capacity or layout.top_k != self.model.config.top_k:
            raise ValueError(
                f"the swapper's layout (req_slots={layout.req_slots}, max_seq_len="
                f"{layout.max_seq_len}, top_k={layout.top_k}) does not fit batch {b}, "
                f"{capacity} positions and top_k {self.model.config.top_k}: resolve with "
                "cache_options=toy_cache_options(...)"
            )
        self.host = self.swapper.new_host_cache(self.model.row_elems, torch.float32)
        self.device = self.swapper.new_device_buffer(self.model.row_elems, torch.float32)
        self.slots = torch.arange(b)
        for slot in range(b):
            self.swapper.reset_request(slot)
        self._write(seqs, torch.zeros_like(lengths), lengths)

    def _write(self, seqs: torch.Tensor, start: torch.Tensor, stop: torch.Tensor) -> None:
        width = int((stop - start).max())
        if width <= 0:
            return
        positions = start[:, None] + torch.arange(width)[None, :]
        keep = positions < stop[:, None]
        req = self.slots[:, None].expand_as(positions)[keep]
        pos = positions[keep]
        rows = self.model.kv_rows(seqs[req, pos], pos)
        self.swapper.write_tail(req, pos, rows, host_cache=self.host, device_buffer=self.device)

    def read(
        self,
        seqs: torch.Tensor,
        lengths: torch.Tensor,
        selected: torch.Tensor,
        context_lens: torch.Tensor,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        locs = self.swapper.swap(
            selected, self.slots, context_lens, host_cache=self.host, device_buffer=self.device
        )
        stats = self.swapper.last_stats
        self._calls += 1
        self._hits += int(stats.hits.sum())
        self._misses += int(stats.misses.sum())
        self._bytes += int(stats.bytes_copied.sum())
        self.last_locations = locs
        valid = locs >= 0
        rows = self.device[locs.clamp(min=0).long()]
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


def swap_property_check(plan: Any, model: ToyLM, *, calls: int = 40, seed: int = 0) -> list[str]:
    """Random multi-step swap calls through `plan.cache_swapper`; returns every violation found.

    After each call: every valid location holds, byte for byte, the row of its token (nothing
    lost); one token gets one location across the steps of a call; distinct tokens of one step
    get distinct locations.
    """
    g = torch.Generator().manual_seed(seed)
    steps = plan.num_tokens_per_req("target_verify")
    layout = plan.cache_swapper.layout
    b = min(4, layout.req_slots)
    capacity = min(layout.max_seq_len, 96)
    seqs = torch.randint(0, model.config.vocab_size, (b, capacity), generator=g)
    lengths = torch.full((b,), capacity // 2)
    reader = SwapReader(plan.cache_swapper, model)
    reader.start(seqs, lengths)
    top_k = model.config.top_k
    found: list[str] = []
    for call in range(calls):
        grow = torch.randint(0, 3, (b,), generator=g)
        new_lengths = (lengths + grow).clamp(max=capacity)
        reader.commit(seqs, lengths, new_lengths)
        lengths = new_lengths
        ctx = (lengths[:, None] - torch.randint(0, 4, (b, steps), generator=g)).clamp(min=1)
        pool = torch.randint(0, int(lengths.min()), (b, 2 * top_k), generator=g)
        pick = torch.randint(0, 2 * top_k, (b, steps, top_k), generator=g)
        selected = torch.gather(pool[:, None, :].expand(b, steps, -1), 2, pick)
        selected = torch.where(torch.rand(selected.shape, generator=g) < 0.1, -1, selected)
        selected = torch.where(selected < ctx[..., None], selected, -1).to(torch.int32)
        rows, valid = reader.read(seqs, lengths, selected, ctx)
        req = torch.arange(b)[:, None, None].expand_as(selected)
        pos = selected.clamp(min=0).long()
        expected = model.kv_rows(seqs[req, pos], pos)
        bad = valid & ~(rows == expected).all(-1)
        if bool(bad.any()):
            found.append(f"call {call}: {int(bad.sum())} rows differ from their host rows")
        if bool((valid != (selected >= 0)).any()):
            found.append(f"call {call}: valid entries disagree with the selection")
        locs = reader.last_locations
        for r in range(b):
            keep = selected[r] >= 0
            tokens, where = selected[r][keep].long(), locs[r][keep].long()
            pairs = torch.unique(torch.stack([tokens, where], 1), dim=0)
            if torch.unique(pairs[:, 0]).numel() != pairs.shape[0]:
                found.append(f"call {call}, request {r}: a token got two locations")
            if torch.unique(pairs[:, 1]).numel() != pairs.shape[0]:
                found.append(f"call {call}, request {r}: two tokens share a location")
    return found
