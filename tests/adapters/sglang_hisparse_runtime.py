"""Drives SGLang's own HiSparse coordinator on CPU, with or without specreg's `hisparse_swap`.

Runs inside the pinned framework environment. Everything is SGLang's real code (its DSA KV pool,
its HiSparse allocator, host pool and `HiSparseCoordinator`, whose ``__init__`` builds the
speculative swap manager), except what needs a GPU, patched here and nowhere else:

- the host pool is built with ``pin_memory=False`` (pinning needs CUDA);
- the device -> host backup (``backup_from_device_all_layer``) and the device -> device
  transfer (``transfer_values_on_device``) are pointer-based GPU kernels: torch row copies here;
- ``copy_cache_planned_mla`` (the skip layers' replay of a miss plan) is CUDA compiled at run
  time: specreg's ``copy_cache_planned`` replays the same plan here.

The calls are SGLang's call sites: ``HiSparseCoordinator(...)`` (builds the manager),
``alloc_device_buffer`` (admission), ``prepare_spec_verify`` (what EAGLE's verify calls),
``swap_in_selected_pages`` (what the DSA backend calls in target-verify), and
``commit_spec_accept_tokens`` / ``request_finished``. Prints one JSON object: what each case saw
(with ``--runs``, one per run, each run a child forked after one SGLang import: one_import.py).
"""

from __future__ import annotations

import functools
import json
import logging
import os
import random
import sys
import time
from types import SimpleNamespace
from typing import Any


class _Captured(logging.Handler):
    """The specreg adapters' log lines of this process."""

    def __init__(self) -> None:
        super().__init__()
        self.lines: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.lines.append(record.getMessage())


CAPTURED = _Captured()
SIG = 4  # int16 words of a KV row that carry its signature (request serial, position, version, layer)


def setup(substitute: str) -> Any:
    """Import SGLang, start a one-process gloo group (the coordinator asks its TP size), patch
    the GPU-only pieces, and apply the substitution the way the payload says."""
    import torch.distributed as dist

    logging.getLogger("specreg.adapters").addHandler(CAPTURED)
    logging.disable(logging.INFO)  # SGLang's import-time notices; specreg logs at WARNING

    os.environ.setdefault("MASTER_ADDR", "127.0.0.1")
    os.environ.setdefault("MASTER_PORT", str(20000 + os.getpid() % 20000))
    if not dist.is_initialized():
        dist.init_process_group("gloo", rank=0, world_size=1)
    if substitute in ("load_plugins", "load_plugins_no_apply"):  # as SGLang's loader runs it
        from sglang.srt.plugins import load_plugins
        from sglang.srt.plugins.hook_registry import HookRegistry

        if substitute == "load_plugins_no_apply":  # a registry that applies nothing (and logs)
            HookRegistry.apply_hooks = classmethod(lambda cls: None)
        load_plugins()
    elif substitute == "install":
        from specreg_hisparse.sglang_seam import install

        install(None)
    import sglang.srt.managers.hisparse_coordinator as hc

    hc.MLATokenToKVPoolHost = functools.partial(hc.MLATokenToKVPoolHost, pin_memory=False)

    def copy_cache_planned_mla(*, miss_src, miss_dst, miss_count, num_real_reqs, host_cache,
                               device_buffer, **_: Any) -> None:
        from specreg_hisparse.kernels.planned_copy import copy_cache_planned

        copy_cache_planned(miss_src, miss_dst, miss_count, num_real_reqs, host_cache, device_buffer)

    hc.copy_cache_planned_mla = copy_cache_planned_mla
    return hc


class World:
    """One coordinator over SGLang's real pools, its requests, and what every token should hold."""

    def __init__(self, hc: Any, *, ndt: int, top_k: int, dbs: int, page: int, slots: int,
                 ctx: int, layers: int = 2, shared: list[bool] | None = None,
                 mla: tuple[int, int] = (32, 16)) -> None:
        import torch
        from sglang.srt.mem_cache.allocator.hisparse import HiSparseTokenToKVPoolAllocator
        from sglang.srt.mem_cache.hisparse_memory_pool import HiSparseDSATokenToKVPool
        from sglang.srt.mem_cache.memory_pool import ReqToTokenPool

        self.torch, self.hc, self.ctx = torch, hc, ctx
        self.ndt, self.top_k, self.dbs, self.page, self.layers = ndt, top_k, dbs, page, layers
        size = slots * (dbs + 2 * page + max(0, ndt * top_k - dbs) + page) + 4 * page
        size = max(size, -(-slots * ctx // (2 * page)) * page)  # logical ids: 2 x size
        pool = HiSparseDSATokenToKVPool(
            size=size, page_size=page, kv_lora_rank=mla[0], dtype=torch.bfloat16,
            qk_rope_head_dim=mla[1], layer_num=layers, device="cpu", index_head_dim=128,
            enable_memory_saver=False, kv_cache_dim=sum(mla),
        )  # fmt: skip
        alloc = HiSparseTokenToKVPoolAllocator(size=size, page_size=page, dtype=torch.bfloat16,
                                               device="cpu", kvcache=pool, need_sort=False)
        rtp = ReqToTokenPool(size=slots, max_context_len=ctx, device="cpu", enable_memory_saver=False)
        self.c = hc.HiSparseCoordinator(
            rtp, alloc, top_k=top_k, device_buffer_size=dbs, device="cpu", tp_group=None,
            num_draft_tokens=ndt, shared_index_layers=shared,
        )  # fmt: skip
        self.patch_gpu_io()
        self.free_slots = list(range(rtp.req_to_token.shape[0]))
        self.free_logical = list(range(1, alloc.size_full + 1))  # 0 means "unmapped"
        self.reqs: dict[int, Any] = {}
        slot_count = rtp.req_to_token.shape[0]
        self.serials = torch.zeros(slot_count, dtype=torch.long)  # the request in each slot
        self.versions = torch.zeros((slot_count, ctx), dtype=torch.int32)  # KV rewrites per token
        self.serial = 0
        self.counts = {"swap_calls": 0, "checked_tokens": 0, "verify_steps": 0, "joined": 0,
                       "left": 0, "replayed_layers": 0}

    # ------------------------------------------------------------------ GPU-only IO, patched
    def patch_gpu_io(self) -> None:
        c = self.c

        def rows(buf: Any) -> Any:
            return buf.view(buf.shape[0], -1)

        def backup_from_device_all_layer(device_pool, host_indices, device_indices, io_backend):
            for layer in range(self.layers):
                rows(c.mem_pool_host.kv_buffer[layer])[host_indices.long()] = rows(
                    device_pool.kv_buffer[layer])[device_indices.long()]

        def transfer_values_on_device(dst_indices, src_indices):
            for layer in range(self.layers):
                buf = rows(c.mem_pool_device.kv_buffer[layer])
                buf[dst_indices.long()] = buf[src_indices.long()].clone()

        c.mem_pool_host.backup_from_device_all_layer = backup_from_device_all_layer
        c.mem_pool_device.transfer_values_on_device = transfer_values_on_device

    # ------------------------------------------------------------------ signatures
    def write_kv(self, buffer: Any, rows: Any, slot: int, positions: list[int], layer: int) -> None:
        """Write the signature of (slot's request, position, its version, layer) into `rows`."""
        torch = self.torch
        view = buffer.view(buffer.shape[0], -1).view(torch.int16)
        pos = torch.tensor(positions, dtype=torch.long)
        sig = torch.stack([
            torch.full_like(pos, int(self.serials[slot]) % 30000 + 1), pos % 30000,
            self.versions[slot, pos].long() % 30000, torch.full_like(pos, layer + 1),
        ], 1).to(torch.int16)
        view[rows.long(), :SIG] = sig

    # ------------------------------------------------------------------ requests
    def join(self, length: int) -> int:
        """A request of `length` prompt tokens, admitted as SGLang's staging leaves it: its
        prompt backed up on host, then `alloc_device_buffer` (SGLang's) binds its buffer."""
        torch, c = self.torch, self.c
        slot = self.free_slots.pop(0)
        self.serial += 1
        logical = self.free_logical[: self.ctx]
        del self.free_logical[: self.ctx]
        c.req_to_token_pool.req_to_token[slot, : len(logical)] = torch.tensor(logical)
        kv = SimpleNamespace(req_pool_idx=slot, kv_allocated_len=length)
        req = SimpleNamespace(kv=kv, serial=self.serial, logical=logical, rid=f"r{self.serial}",
                              extend_end=length, seq_len=length)
        self.reqs[slot] = req
        self.serials[slot] = self.serial
        self.versions[slot] = 0
        host = c.mem_pool_host.alloc_paged_token_slots(
            c.req_to_host_pool, c.req_to_host_pool_allocated_len, slot, 0, length)
        for layer in range(self.layers):
            self.write_kv(c.mem_pool_host.kv_buffer[layer], host, slot, list(range(length)), layer)
        c.alloc_device_buffer(req)
        # prefill wrote the first device_buffer_size tokens into the buffer's rows
        first = min(length, self.dbs)
        dev_rows = c.req_to_device_buffer[slot, :first]
        for layer in range(self.layers):
            self.write_kv(c.mem_pool_device.kv_buffer[layer], dev_rows, slot, list(range(first)),
                          layer)
        self.counts["joined"] += 1
        return slot

    def leave(self, slot: int) -> None:
        req = self.reqs.pop(slot)
        self.c.request_finished(req)
        self.free_slots.append(slot)
        self.free_logical.extend(req.logical)
        self.counts["left"] += 1

    # ------------------------------------------------------------------ one verify step
    def batch(self, slots: list[int]) -> Any:
        torch = self.torch
        reqs = [self.reqs[s] for s in slots]
        seq = torch.tensor([r.seq_len for r in reqs], dtype=torch.int64)
        out = torch.tensor([r.logical[r.seq_len + i] for r in reqs for i in range(self.ndt)])
        return SimpleNamespace(
            reqs=reqs, req_pool_indices=torch.tensor(slots, dtype=torch.int64), seq_lens=seq,
            out_cache_loc=out, forward_mode=SimpleNamespace(is_idle=lambda: False),
        )  # fmt: skip

    def selection(self, rng: random.Random, slots: list[int], pick: Any = None) -> tuple[Any, Any]:
        """Top-k per step: `pick(slot, step, visible)`, or random (mostly the recent 3 x top_k
        tokens, some anywhere before; repeats within and across steps), plus one -1 and one
        token past the step's seq_len."""
        torch = self.torch
        start = torch.tensor([self.reqs[s].seq_len for s in slots])
        visible = start[:, None] + torch.arange(1, self.ndt + 1)  # [bs, steps]
        seq = visible.reshape(-1).to(torch.int32)
        if pick is not None:
            rows = [[(pick(s, step, int(visible[b, step])) + [-1] * self.top_k)[: self.top_k]
                     for step in range(self.ndt)] for b, s in enumerate(slots)]
            return torch.tensor(rows, dtype=torch.int32), seq
        gen = torch.Generator().manual_seed(rng.getrandbits(62))
        shape = (len(slots), self.ndt, self.top_k - 2)
        vis = visible[:, :, None]
        recent = vis - 1 - (torch.rand(shape, generator=gen) * vis.clamp(max=3 * self.top_k)).long()
        anywhere = (torch.rand(shape, generator=gen) * vis).long()
        chosen = torch.where(torch.rand(shape, generator=gen) < 0.3, anywhere, recent)
        extra = torch.cat([torch.full_like(vis, -1), vis + 5], 2)
        return torch.cat([chosen, extra], 2).to(torch.int32), seq

    def verify(self, rng: random.Random, slots: list[int], *, accept: list[int] | None = None,
               pick: Any = None, check: bool = True, pad: int = 0) -> dict[str, Any]:
        """EAGLE's verify of one batch: prepare (SGLang's), the target forward writing the verify
        tokens' KV, every layer's swap (SGLang's DSA call), a check, then the commit."""
        torch, c = self.torch, self.c
        for s in slots:
            r = self.reqs[s]
            r.kv.kv_allocated_len = r.seq_len + self.ndt
            self.versions[s, r.seq_len : r.seq_len + self.ndt] += 1  # the target's new KV
        batch = self.batch(slots)
        c.num_real_reqs.fill_(len(slots))
        c.prepare_spec_verify(batch)
        mapping = c.token_to_kv_pool_allocator.full_to_hisparse_device_index_mapping
        verify_rows = mapping[batch.out_cache_loc]
        for layer in range(self.layers):
            for b, s in enumerate(slots):
                r = self.reqs[s]
                self.write_kv(c.mem_pool_device.kv_buffer[layer],
                              verify_rows[b * self.ndt : (b + 1) * self.ndt], s,
                              [r.seq_len + i for i in range(self.ndt)], layer)
        top_k, seq = self.selection(rng, slots, pick)
        req_pool_indices, all_top_k, all_seq = batch.req_pool_indices, top_k, seq
        if pad:  # CUDA-graph padding rows past num_real_reqs, repeating the first slot
            req_pool_indices = torch.cat([req_pool_indices, req_pool_indices[:1].repeat(pad)])
            all_top_k = torch.cat([top_k, top_k[:1].repeat(pad, 1, 1)])
            all_seq = torch.cat([seq, seq[: self.ndt].repeat(pad)])
        seen = []
        for layer in range(self.layers):
            before = (c.req_device_buffer_tokens[layer].clone(),
                      c.req_device_buffer_token_locs[layer].clone())
            out = c.swap_in_selected_pages(req_pool_indices, all_seq, all_top_k, layer).clone()
            locs = out[: len(slots)]
            self.counts["swap_calls"] += 1
            if self.c.enable_prefetch and self.c._is_shared_index_layer[layer]:
                self.counts["replayed_layers"] += 1
            if check:
                self.check(slots, top_k, seq, locs, layer)
            seen.append((top_k, seq, locs, before, out[len(slots):]))
        if accept is None:
            accept = [rng.randint(1, self.ndt) for _ in slots]
        index = torch.full((len(slots), self.ndt), -1, dtype=torch.int64)
        for b, n in enumerate(accept):
            index[b, :n] = torch.arange(n) + b * self.ndt
        c.commit_spec_accept_tokens(batch, index)
        for s, n in zip(slots, accept, strict=True):
            self.reqs[s].seq_len += n  # rejected positions get new KV at the next verify
        self.counts["verify_steps"] += 1
        return {"seen": seen}

    def check(self, slots: list[int], top_k: Any, seq: Any, locs: Any, layer: int) -> None:
        """Every valid selected token's device row holds its KV; every invalid one reads -1."""
        torch = self.torch
        dev = self.c.mem_pool_device.kv_buffer[layer]
        view = dev.view(dev.shape[0], -1).view(torch.int16)
        bs = len(slots)
        tokens = top_k.long()
        visible = seq.view(bs, self.ndt, 1).long()
        valid = (tokens >= 0) & (tokens < visible)
        assert bool((locs[~valid] == -1).all()), "an invalid selection did not read -1"
        rows = torch.tensor(slots)[:, None, None].expand_as(tokens)[valid]
        positions = tokens[valid]
        want = torch.stack([
            self.serials[rows] % 30000 + 1, positions % 30000,
            self.versions[rows, positions].long() % 30000,
            torch.full_like(positions, layer + 1),
        ], 1).to(torch.int16)
        got_rows = locs[valid].long()
        assert bool((got_rows >= 0).all()), "a valid selection read -1"
        got = view[got_rows, :SIG]
        bad = (got != want).any(1)
        if bool(bad.any()):
            i = int(bad.nonzero()[0])
            raise AssertionError(
                f"slot {int(rows[i])} token {int(positions[i])} layer {layer}: row "
                f"{int(got_rows[i])} holds {got[i].tolist()}, want {want[i].tolist()}")
        self.counts["checked_tokens"] += int(valid.sum())


# ------------------------------------------------------------------------------ the cases
def builds(hc: Any, cases: list[list[int]]) -> list[dict[str, Any]]:
    """The coordinator building its manager for (draft tokens, top_k, device_buffer_size, page)."""
    out = []
    for ndt, top_k, dbs, page in cases:
        try:
            world = World(hc, ndt=ndt, top_k=top_k, dbs=dbs, page=page, slots=2, ctx=dbs * 4)
        except Exception as exc:  # noqa: BLE001 - what SGLang (or specreg) refused with
            code = getattr(getattr(exc, "problems", [None])[0], "code", None)
            out.append({"case": [ndt, top_k, dbs, page], "built": False,
                        "error": type(exc).__name__, "code": code, "message": str(exc)})
            continue
        manager = world.c.spec_swap
        out.append({"case": [ndt, top_k, dbs, page], "built": True,
                    "manager": f"{type(manager).__module__}.{type(manager).__qualname__}",
                    "scratch_capacity": manager.scratch_capacity})
    return out


def swap_path(hc: Any, cases: list[list[int]], steps: int, seed: int) -> list[dict[str, Any]]:
    """Requests of a long prompt (beyond the device buffer), verified `steps` times through
    SGLang's own call sites, every selected token checked against what it should hold."""
    out = []
    for ndt, top_k, dbs, page in cases:
        rng = random.Random(seed + ndt)
        world = World(hc, ndt=ndt, top_k=top_k, dbs=dbs, page=page, slots=3, ctx=dbs * 8)
        slots = [world.join(dbs + 3 * top_k), world.join(dbs // 2)]
        for _ in range(steps):
            world.verify(rng, slots)
        out.append({"case": [ndt, top_k, dbs, page], **world.counts})
    return out


def churn(hc: Any, ndt: int, steps: int, seed: int) -> dict[str, Any]:
    """`steps` verify steps while requests join and leave at random; every token checked."""
    rng = random.Random(seed)
    world = World(hc, ndt=ndt, top_k=16, dbs=64, page=64, slots=4, ctx=1024, layers=1)
    live: list[int] = []
    started = time.perf_counter()
    for _ in range(steps):
        if live and (rng.random() < 0.03 or any(world.reqs[s].seq_len > 900 for s in live)):
            world.leave(live.pop(rng.randrange(len(live))))
        if len(live) < 3 and (not live or rng.random() < 0.1):
            live.append(world.join(rng.randint(1, 300)))
        batch = rng.sample(live, rng.randint(1, len(live)))
        world.verify(rng, batch)
    return {**world.counts, "seconds": time.perf_counter() - started,
            "totals": world.c.spec_swap.swapper.totals.tolist()}


def replay(hc: Any, ndt: int, steps: int, seed: int) -> dict[str, Any]:
    """A shared-index model (layer 1 reuses layer 0's top-k): the anchor records its miss plan
    and SGLang's prefetch path replays it into layer 1; layer 1's rows are checked too."""
    rng = random.Random(seed)
    world = World(hc, ndt=ndt, top_k=16, dbs=64, page=64, slots=3, ctx=512, layers=2,
                  shared=[False, True])
    slots = [world.join(200), world.join(90)]
    planned = 0
    for _ in range(steps):
        world.verify(rng, slots)
        planned += int(world.c._miss_count[: len(slots)].sum())
    return {**world.counts, "planned_rows": planned, "prefetch": world.c.enable_prefetch}


def contract(hc: Any, ndt: int, seed: int) -> dict[str, Any]:
    """One padded verify whose selection holds every case of SGLang's location contract (read
    off its kernel, ``hisparse_spec.cuh``), each occurrence classified against the coordinator's
    tables as they stood right before the swap:

    - invalid (token < 0 or >= its step's seq_len): -1;
    - extra page (``token >= seq_len - page_size`` and the extra page holds it): exactly that
      page slot's device row;
    - hot hit (a hot slot holds it): exactly that slot's device row, no copy;
    - host miss: one of the request's own rows (its hot rows or scratch), the same row for
      every occurrence of the token in the call, distinct tokens on distinct rows, none of them a
      row this call reads for a hit or the extra page; and the row holds the host copy (`check`);
    - CUDA-graph padding rows (``>= num_real_reqs``): 0 everywhere.
    """
    rng = random.Random(seed)
    world = World(hc, ndt=ndt, top_k=12, dbs=64, page=64, slots=3, ctx=512, layers=1)
    a, b = world.join(200), world.join(10)  # long (beyond the buffer: misses) and short
    world.verify(rng, [a, b], accept=[ndt, 1])  # a's newest token now sits on the extra page

    def pick(slot: int, step: int, visible: int) -> list[int]:
        start = world.reqs[slot].seq_len
        verify = [start + i for i in range(step + 1)]  # this step's visible verify tokens
        far = [90 + step, 120, 150, 151] if visible > 151 else []  # beyond the buffer: host only
        return [start - 1, *verify, 3, 7, *far, -1, visible, visible + 3][: world.top_k]

    seen = world.verify(rng, [a, b], accept=[1, 1], pick=pick, pad=1)["seen"][0]
    top_k, seq, locs, (tokens_before, locs_before), padded = seen
    scratch = world.c.spec_swap.req_to_scratch[0]
    hot, page = world.dbs, world.page
    cases: dict[str, list[int]] = {}
    for row, slot in enumerate([a, b]):
        owned = set(locs_before[slot, :hot].tolist()) | set(scratch[slot].tolist())
        extra = {t: loc for t, loc in zip(tokens_before[slot, hot:].tolist(),
                                          locs_before[slot, hot:].tolist(), strict=True)
                 if t >= 0 and loc >= 0}
        held = {t: int(locs_before[slot, j]) for j, t in enumerate(tokens_before[slot, :hot].tolist())
                if t >= 0}
        read, misses = set(), {}
        for step in range(ndt):
            visible = int(seq[row * ndt + step])
            for token, loc in zip(top_k[row, step].tolist(), locs[row, step].tolist(), strict=True):
                if not 0 <= token < visible:
                    kind, ok = "invalid", loc == -1
                elif token >= visible - page and token in extra:
                    kind, ok = "extra_page", loc == extra[token]
                    read.add(loc)
                elif token in held:
                    kind, ok = "hot_hit", loc == held[token]
                    read.add(loc)
                else:
                    kind, ok = "host_miss", loc in owned and misses.setdefault(token, loc) == loc
                cases.setdefault(kind, []).append(int(ok))
        rows = list(misses.values())
        cases.setdefault("miss_rows_distinct_and_unread", []).append(
            int(len(set(rows)) == len(rows) and not set(rows) & read))
    cases["padding_row_zero"] = [int(all(v == 0 for v in padded.reshape(-1).tolist()))]
    return {"ndt": ndt, "cases": {k: [sum(v), len(v)] for k, v in sorted(cases.items())},
            "checked_tokens": world.counts["checked_tokens"]}


def sabotaged(hc: Any) -> dict[str, Any]:
    """What `install` does when SGLang's registry does not apply the REPLACE (it only logs
    failures), then when the manager lost a method its callers use."""
    from sglang.srt.plugins.hook_registry import HookRegistry

    from specreg_hisparse.sglang_seam import install

    out = {}
    apply_hooks = HookRegistry.__dict__["apply_hooks"]
    commit = hc.HiSparseSpecSwapManager.commit_accept_tokens
    for how in ("no_apply", "moved"):
        if how == "no_apply":
            HookRegistry.apply_hooks = classmethod(lambda cls: None)
        else:
            HookRegistry.apply_hooks = apply_hooks
            del hc.HiSparseSpecSwapManager.commit_accept_tokens
        try:
            install(None)
            out[how] = {"error": None}
        except Exception as exc:  # noqa: BLE001 - the coded refusal is the result
            problems = getattr(exc, "problems", [])
            out[how] = {"error": type(exc).__name__, "codes": [p.code for p in problems],
                        "message": str(exc)}
        out[how]["manager_class"] = hc.HiSparseSpecSwapManager.__qualname__
    hc.HiSparseSpecSwapManager.commit_accept_tokens = commit
    return out


def corrupted(hc: Any, ndt: int) -> str:
    """Negative control: host rows of the tokens beyond the device buffer are overwritten after
    admission, so the swap copies wrong rows in and `check` must say so."""
    world = World(hc, ndt=ndt, top_k=16, dbs=64, page=64, slots=2, ctx=512, layers=1)
    slot = world.join(200)
    host = world.c.mem_pool_host.kv_buffer[0]
    rows = world.c.req_to_host_pool[slot, 64:190]
    host.view(host.shape[0], -1)[rows] = 0
    try:
        world.verify(random.Random(5), [slot])
    except AssertionError as exc:
        return str(exc)
    return "not detected"


def run(payload: dict[str, Any]) -> dict[str, Any]:
    hc = setup(payload.get("substitute", "off"))
    manager = hc.HiSparseSpecSwapManager
    result: dict[str, Any] = {"manager_class": f"{manager.__module__}.{manager.__qualname__}"}
    started = time.perf_counter()
    if "builds" in payload:
        result["builds"] = builds(hc, payload["builds"])
    if "swap_path" in payload:
        result["swap_path"] = swap_path(hc, payload["swap_path"], payload.get("steps", 6), 7)
    if "churn" in payload:
        result["churn"] = churn(hc, *payload["churn"])
    if "replay" in payload:
        result["replay"] = replay(hc, *payload["replay"])
    if "contract" in payload:
        result["contract"] = [contract(hc, ndt, 11) for ndt in payload["contract"]]
    if "server_args" in payload:
        from sglang.srt.server_args import ServerArgs

        try:
            ServerArgs(**payload["server_args"]).resolve_once()
            result["server_args"] = {"error": None}
        except Exception as exc:  # noqa: BLE001 - the refusal is the observation
            problems = getattr(exc, "problems", [])
            result["server_args"] = {"error": type(exc).__name__, "message": str(exc),
                                     "codes": [p.code for p in problems]}
    if payload.get("sabotaged"):  # last: it leaves the process without a working install
        result["sabotaged"] = sabotaged(hc)
    if "corrupted" in payload:
        result["corrupted"] = corrupted(hc, payload["corrupted"])
    from specreg.adapters import substitution_runtime
    from specreg_hisparse.sglang_seam import installed

    result["installed"] = installed()
    result["active"] = list(substitution_runtime.active())
    result["log"] = CAPTURED.lines
    result["seconds"] = time.perf_counter() - started
    # the whole process (SGLang's import included), or after one_import.py's fork the run's own
    result["cpu_seconds"] = time.process_time()
    return result


def preload() -> None:
    """What every run imports before its own setup (one_import.py): torch and SGLang's plugin
    loader, which brings most of SGLang; the run imports the coordinator after loading plugins,
    as before."""
    import sglang.srt.plugins  # noqa: F401
    import sglang.srt.plugins.hook_registry  # noqa: F401
    import torch  # noqa: F401
    import torch.distributed  # noqa: F401


def main() -> None:
    if "--runs" in sys.argv:  # several runs in one process (one_import.py)
        import one_import

        one_import.main(preload, run)
        return
    result = run(json.load(sys.stdin))
    sys.stdout.write("\n" + json.dumps(result) + "\n")


if __name__ == "__main__":
    main()
