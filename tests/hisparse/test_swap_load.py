"""HiSparse swapper under load: thousands of random multi-step swaps over 64 request slots with
resets keep the nothing-lost invariant after every call, and the swapper's memory does not grow.

CI runs 10,000 calls (about 30 s here); `--fuzz-long` runs 50,000."""

from __future__ import annotations

import gc
import tracemalloc

import pytest
import torch
from specreg_hisparse.sizes import compute_layout
from specreg_hisparse.swapper import HiSparseSwapper

SLOTS, TOP_K, HOT, STEPS, SEQ, ROW = 64, 8, 16, 3, 96, 4


def _state_bytes(swapper: HiSparseSwapper) -> int:
    tensors = [v for v in vars(swapper.state).values() if isinstance(v, torch.Tensor)]
    tensors += [t for ws in getattr(swapper.state, "_ws", {}).values() for t in ws.values()]
    return sum(t.numel() * t.element_size() for t in tensors)


def _register(swapper: HiSparseSwapper, slot: int) -> None:
    pos = torch.arange(SEQ)
    req = torch.full((SEQ,), slot)
    swapper.set_host_locs(req, pos, swapper.default_host_rows(req, pos))


def _run(calls: int, seed: int = 0) -> None:
    layout, problems = compute_layout(TOP_K, HOT, None, SLOTS, STEPS, row_bytes=ROW * 4,
                                      max_seq_len=SEQ)  # fmt: skip
    assert layout is not None, problems
    swapper = HiSparseSwapper(layout)
    host = swapper.new_host_cache(ROW, torch.int32)
    dev = swapper.new_device_buffer(ROW, torch.int32)
    host.copy_(torch.randint(-(2**31), 2**31 - 1, host.shape, dtype=torch.int32))
    for slot in range(SLOTS):
        _register(swapper, slot)
    gen = torch.Generator().manual_seed(seed)
    bytes_before, mem_before = None, None
    for call in range(calls):
        if call == 50:  # after warm-up (workspaces sized), measure
            gc.collect()
            tracemalloc.start()
            bytes_before, mem_before = _state_bytes(swapper), tracemalloc.get_traced_memory()[0]
        if int(torch.randint(0, 10, (), generator=gen)) == 0:
            slot = int(torch.randint(0, SLOTS, (), generator=gen))
            swapper.reset_request(slot)
            _register(swapper, slot)
        bs = int(torch.randint(1, 9, (), generator=gen))
        req = torch.randperm(SLOTS, generator=gen)[:bs]
        steps = int(torch.randint(1, STEPS + 1, (), generator=gen))
        k = int(torch.randint(1, TOP_K + 1, (), generator=gen))
        seq = torch.randint(1, SEQ + 1, (bs, steps), generator=gen)
        tokens = torch.randint(-1, SEQ, (bs, steps, k), generator=gen, dtype=torch.int32)
        locs = swapper.swap(tokens, req, seq, host_cache=host, device_buffer=dev)
        valid = (tokens >= 0) & (tokens < seq[:, :, None])
        assert torch.equal(locs >= 0, valid)
        host_rows = req.view(bs, 1, 1).long() * SEQ + tokens.long()
        assert torch.equal(dev[locs[valid].long()], host[host_rows[valid]]), f"call {call}"
    assert bytes_before is not None and mem_before is not None
    gc.collect()
    mem_after = tracemalloc.get_traced_memory()[0]
    tracemalloc.stop()
    assert _state_bytes(swapper) == bytes_before
    assert mem_after - mem_before < 256 * 1024, (mem_before, mem_after)


@pytest.mark.slow
def test_swap_under_load(fuzz_long):
    _run(50_000 if fuzz_long else 10_000)


def test_hisparse_default_row_bytes_work_with_the_swappers_helpers():
    import torch

    from specreg import Registry
    from specreg.errors import KernelInputError

    registry = Registry.load(allowlist={"eagle", "hisparse"}, fresh=True)
    plan = registry.resolve({"algorithm": "eagle", "cache": "hisparse",
                             "cache_options": {"req_slots": 2, "max_seq_len": 64}})
    swapper = plan.cache_swapper
    assert swapper.layout.row_bytes == 656  # the default
    host = swapper.new_host_cache(dtype=torch.float32)
    dev = swapper.new_device_buffer(dtype=torch.bfloat16)
    assert host.shape[1] * 4 == dev.shape[1] * 2 == 656
    with pytest.raises(KernelInputError) as info:
        swapper.new_host_cache(656, torch.bfloat16)
    text = str(info.value)
    assert info.value.code == "SR411"
    assert "row_elems=656 x 2 bytes = 1312" in text
    assert "Fix: call new_host_cache(dtype=torch.bfloat16) without row_elems" in text


def test_lazy_swap_state_first_used_inside_inference_mode_serves_outside_it():
    import torch

    from specreg import Registry

    registry = Registry.load(allowlist={"eagle", "hisparse"}, fresh=True)
    swapper = registry.resolve({"algorithm": "eagle", "cache": "hisparse",
                                "cache_options": {"req_slots": 2, "max_seq_len": 64}}).cache_swapper
    assert swapper._state is None  # nothing allocated by resolve
    with torch.inference_mode():
        assert swapper.slot_tokens.shape[1] == 2  # first use allocates
    swapper.reset_request(1)  # in-place updates outside inference mode still work
    assert int(swapper.host_cache_locs[1].max()) == -1
