"""The Triton path (through the interpreter) makes exactly the torch path's decisions."""

import pytest
import torch
from specreg_hisparse.kernels.planned_copy import copy_cache_planned
from specreg_hisparse.kernels.planned_copy.torch_impl import copy_planned_torch
from specreg_hisparse.kernels.planned_copy.triton_impl import copy_planned_triton
from specreg_hisparse.kernels.planned_copy.types import PlannedCopy

from specreg.errors import CacheMissError
from tests.support.hisparse import ROW_ELEMS, make_cache, small_layout


def _run(backend, monkeypatch, layout, calls, host_tokens=None):
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", backend)
    swapper, host, dev = make_cache(layout, host_tokens=host_tokens)
    results = []
    for tokens, req, seq, num_real, tail in calls:
        if tail is not None:
            pos, kv = tail
            swapper.write_tail(req[:1].repeat(pos.numel()), pos, kv, host_cache=host,
                               device_buffer=dev)  # fmt: skip
        locs = swapper.swap(tokens, req, seq, num_real, host_cache=host, device_buffer=dev)
        plan = swapper.last_plan
        results.append((locs.clone(), plan.miss_count.clone(), plan.miss_src.clone(),
                        plan.miss_dst.clone(), swapper.last_stats.hits.clone()))  # fmt: skip
    return swapper, dev, results


def _calls(layout, seed, n_calls=4):
    gen = torch.Generator().manual_seed(seed)
    calls = []
    for i in range(n_calls):
        bs, steps = 3, int(torch.randint(1, layout.max_steps + 1, (), generator=gen))
        tokens = torch.randint(-1, 24, (bs, steps, layout.top_k), generator=gen, dtype=torch.int32)
        req = torch.tensor([2, 0, 2])  # row 2 is padding sharing row 0's slot
        seq = torch.randint(8, 30, (bs, steps), generator=gen)
        num_real = torch.tensor([2], dtype=torch.int32)
        tail = None
        if i % 2:
            pos = torch.arange(int(seq[0, 0]) - 1, int(seq[0, 0]) - 1 + steps)
            tail = (pos, torch.randint(0, 99, (steps, ROW_ELEMS), generator=gen, dtype=torch.int32))
        calls.append((tokens, req, seq, num_real, tail))
    return calls


@pytest.mark.parametrize("seed, hot", [(0, 8), (1, 5)])
def test_triton_equals_torch_over_a_call_sequence(monkeypatch, seed, hot):
    layout = small_layout(hot_size=hot, max_seq_len=40)
    calls = _calls(layout, seed)
    ref, ref_dev, ref_out = _run("torch", monkeypatch, layout, calls)
    tri, tri_dev, tri_out = _run("triton", monkeypatch, layout, calls)
    for a, b in zip(ref_out, tri_out, strict=True):
        locs_a, count_a, src_a, dst_a, hits_a = a
        locs_b, count_b, src_b, dst_b, hits_b = b
        assert torch.equal(locs_a, locs_b)
        assert torch.equal(count_a, count_b) and torch.equal(hits_a, hits_b)
        assert torch.equal(src_a, src_b) and torch.equal(dst_a, dst_b)
    for name in ("slot_tokens", "slot_stamp", "clock", "tail_tokens"):
        assert torch.equal(getattr(ref.state, name), getattr(tri.state, name)), name
    assert torch.equal(ref_dev, tri_dev)
    assert int(tri.error_count) == 0


def test_triton_flags_unserveable_tokens_without_raising(monkeypatch):
    layout = small_layout(max_seq_len=40)
    tokens = torch.tensor([[[1, 12, 3, -1], [12, 2, 1, 3]]], dtype=torch.int32)
    seq = torch.tensor([[20, 20]])
    one = torch.tensor([1], dtype=torch.int32)
    call = [(tokens, torch.tensor([0]), seq, one, None)]
    tri, _, (out,) = _run("triton", monkeypatch, layout, call, host_tokens=10)
    locs = out[0]
    assert torch.all(locs[tokens == 12] == -1)
    assert int(tri.error_count) == 1  # counted once per distinct unserveable token
    with pytest.raises(CacheMissError) as info:
        tri.check_errors()
    assert info.value.code == "SR409"
    assert int(tri.error_count) == 0
    # the rest equals torch run on the same call with the unserveable token masked out
    masked = [(torch.where(tokens == 12, -1, tokens), torch.tensor([0]), seq, one, None)]
    ref, _, (ref_out,) = _run("torch", monkeypatch, layout, masked, host_tokens=10)
    assert torch.equal(ref_out[0], locs)
    assert torch.equal(ref.state.slot_tokens, tri.state.slot_tokens)


def test_planned_copy_triton_equals_torch():
    gen = torch.Generator().manual_seed(3)
    host = torch.randint(0, 2**30, (50, 5), generator=gen, dtype=torch.int32)
    src = torch.randint(0, 50, (3, 20), generator=gen)
    dst = torch.randperm(60, generator=gen)[:60].view(3, 20).int()
    count = torch.tensor([20, 7, 20], dtype=torch.int32)
    num_real = torch.tensor([2], dtype=torch.int32)
    a = torch.zeros(60, 5, dtype=torch.int32)
    b = torch.zeros(60, 5, dtype=torch.int32)
    copy_planned_torch(PlannedCopy(miss_src=src, miss_dst=dst, miss_count=count, num_real=num_real,
                                   host_cache=host, device_buffer=a, num_real_int=2))
    copy_planned_triton(PlannedCopy(miss_src=src, miss_dst=dst, miss_count=count,
                                    num_real=num_real, host_cache=host, device_buffer=b),
                        num_chunks=2, block_m=4)
    assert torch.equal(a, b)
    assert a[dst[2].long()].eq(0).all()  # the padded row copies nothing


def test_replay_dispatches_to_triton(monkeypatch):
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "triton")
    host = torch.arange(30, dtype=torch.uint8).view(10, 3)  # 3-byte rows: byte copies
    dev = torch.zeros(6, 3, dtype=torch.uint8)
    src = torch.tensor([[4, 9]])
    dst = torch.tensor([[5, 0]], dtype=torch.int32)
    copy_cache_planned(src, dst, torch.tensor([2], dtype=torch.int32), 1, host, dev)
    assert torch.equal(dev[5], host[4]) and torch.equal(dev[0], host[9])
