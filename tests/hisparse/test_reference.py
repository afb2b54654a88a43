"""Both swap implementations (torch with and without numpy, Triton through the interpreter) and
both planned-copy implementations make exactly the plain reference rule's decisions."""

import pytest
import specreg_hisparse.kernels.swap.torch_impl as swap_torch_impl
import torch
from specreg_hisparse.kernels.planned_copy import copy_cache_planned
from specreg_hisparse.kernels.planned_copy.reference import (
    copy_planned_reference,
    planned_rows_reference,
)
from specreg_hisparse.kernels.planned_copy.torch_impl import copy_planned_torch, planned_rows
from specreg_hisparse.kernels.planned_copy.triton_impl import copy_planned_triton
from specreg_hisparse.kernels.planned_copy.types import PlannedCopy
from specreg_hisparse.kernels.swap.reference import swap_reference
from specreg_hisparse.kernels.swap.types import SwapCall

from specreg.errors import CacheMissError
from tests.support.hisparse import ROW_ELEMS, make_cache, small_layout

STATE = ("slot_tokens", "slot_stamp", "clock", "tail_tokens", "host_cache_locs")
IMPLS = ["torch", "torch-no-numpy", "triton"]


def _reference_swap(swapper, tokens, req, seq, num_real, layer, host, dev):
    """What `swapper.swap` returns and records, computed by the reference rule."""
    if tokens.dim() == 2:
        tokens = tokens.unsqueeze(1)
    bs, steps, top_k = tokens.shape
    width = steps * top_k
    call = SwapCall(
        tokens=tokens.contiguous(), req=req, seq_lens=seq.reshape(bs, steps), layer=layer,
        num_real=torch.tensor([num_real], dtype=torch.int32), num_real_int=num_real,
        state=swapper.state, layout=swapper.layout,
        out=torch.empty(tokens.shape, dtype=torch.int32),
        miss_src=torch.empty((bs, width), dtype=torch.int64),
        miss_dst=torch.empty((bs, width), dtype=torch.int32),
        miss_count=torch.empty(bs, dtype=torch.int32), hits=torch.empty(bs, dtype=torch.int32),
    )  # fmt: skip
    errors = swap_reference(call)
    copy_planned_reference(
        PlannedCopy(miss_src=call.miss_src, miss_dst=call.miss_dst, miss_count=call.miss_count,
                    num_real=call.num_real, num_real_int=num_real, host_cache=host,
                    device_buffer=dev)  # fmt: skip
    )
    return call, errors


def _calls(layout, seed, n_calls, bs=3):
    """Random calls: mixed step counts, -1 and >= seq_len entries, repeats across steps, a
    padding row sharing a real row's slot, and new tail tokens every other call."""
    gen = torch.Generator().manual_seed(seed)
    out = []
    for i in range(n_calls):
        steps = int(torch.randint(1, layout.max_steps + 1, (), generator=gen))
        tokens = torch.randint(-1, 18, (bs, steps, layout.top_k), generator=gen, dtype=torch.int32)
        req = torch.randperm(layout.req_slots, generator=gen)[:bs]
        num_real = int(torch.randint(1, bs + 1, (), generator=gen))
        req[num_real:] = req[0]
        seq = torch.randint(6, 34, (bs, steps), generator=gen)
        layer = int(torch.randint(0, layout.layers, (), generator=gen))
        tail = None
        if i % 2:
            pos = torch.arange(steps) + int(seq[0, 0]) - 1
            tail = (int(req[0]), pos, torch.randint(0, 99, (steps, ROW_ELEMS), generator=gen,
                                                    dtype=torch.int32))  # fmt: skip
        out.append((tokens, req, seq, num_real, layer, tail))
    return out


def _write_tail(swapper, host, dev, tail):
    if tail is not None:
        slot, pos, kv = tail
        swapper.write_tail(torch.full((pos.numel(),), slot), pos, kv, host_cache=host,
                           device_buffer=dev)  # fmt: skip


def _use(impl, monkeypatch):
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "triton" if impl == "triton" else "torch")
    if impl == "torch-no-numpy":
        monkeypatch.setattr(swap_torch_impl, "numpy", None)


@pytest.mark.parametrize("impl", IMPLS)
@pytest.mark.parametrize("seed, hot, layers", [(0, 8, 1), (1, 5, 2), (2, 4, 1)])
def test_swap_equals_the_reference_over_a_call_sequence(monkeypatch, impl, seed, hot, layers):
    layout = small_layout(hot_size=hot, max_seq_len=40, layers=layers)  # hot 4/5: scratch rows
    calls = _calls(layout, seed, n_calls=5)
    ref, ref_host, ref_dev = make_cache(layout)
    _use(impl, monkeypatch)
    sw, host, dev = make_cache(layout)
    assert sw.backend == ("triton" if impl == "triton" else "torch")
    for tokens, req, seq, num_real, layer, tail in calls:
        _write_tail(ref, ref_host, ref_dev, tail)
        _write_tail(sw, host, dev, tail)
        expected, errors = _reference_swap(ref, tokens, req, seq, num_real, layer, ref_host,
                                           ref_dev)  # fmt: skip
        assert errors == 0
        locs = sw.swap(tokens, req, seq, num_real, layer=layer, host_cache=host,
                       device_buffer=dev)  # fmt: skip
        plan, stats = sw.last_plan, sw.last_stats
        assert torch.equal(locs, expected.out)
        assert torch.equal(plan.miss_src, expected.miss_src)
        assert torch.equal(plan.miss_dst, expected.miss_dst)
        assert torch.equal(plan.miss_count, expected.miss_count)
        assert torch.equal(stats.hits, expected.hits)
        assert torch.equal(stats.misses, expected.miss_count)
        assert torch.equal(stats.bytes_copied, expected.miss_count.long() * layout.row_bytes)
        for name in STATE:
            assert torch.equal(getattr(sw.state, name), getattr(ref.state, name)), name
        assert torch.equal(dev, ref_dev)  # the copied bytes
    assert int(sw.error_count) == int(ref.error_count) == 0


@pytest.mark.parametrize("impl", IMPLS)
def test_unserveable_tokens_match_the_reference_error_flags(monkeypatch, impl):
    layout = small_layout(max_seq_len=40)
    tokens = torch.tensor([[[1, 12, 3, -1], [12, 2, 1, 15]], [[0, 1, 2, 3], [4, 5, 6, 7]]],
                          dtype=torch.int32)  # fmt: skip
    req, seq = torch.tensor([0, 1]), torch.tensor([[20, 20], [20, 20]])
    ref, ref_host, ref_dev = make_cache(layout, host_tokens=10)
    expected, errors = _reference_swap(ref, tokens, req, seq, 2, 0, ref_host, ref_dev)
    assert errors == 2 and int(ref.error_count) == 2  # tokens 12 and 15, each counted once
    _use(impl, monkeypatch)
    sw, host, dev = make_cache(layout, host_tokens=10)
    before = {name: getattr(sw.state, name).clone() for name in STATE}
    if impl != "triton":  # the torch path raises before changing anything
        with pytest.raises(CacheMissError) as info:
            sw.swap(tokens, req, seq, 2, host_cache=host, device_buffer=dev)
        assert info.value.code == "SR409"
        for name in STATE:
            assert torch.equal(getattr(sw.state, name), before[name]), name
        return
    locs = sw.swap(tokens, req, seq, torch.tensor([2], dtype=torch.int32), host_cache=host,
                   device_buffer=dev)  # fmt: skip
    assert torch.equal(locs, expected.out)
    assert torch.equal(sw.last_plan.miss_count, expected.miss_count)
    assert torch.equal(sw.last_plan.miss_src, expected.miss_src)
    assert torch.equal(sw.last_plan.miss_dst, expected.miss_dst)
    for name in STATE:
        assert torch.equal(getattr(sw.state, name), getattr(ref.state, name)), name
    assert torch.equal(dev, ref_dev)
    assert int(sw.error_count) == errors


def test_the_reference_rule_on_a_hand_worked_call():
    """The rule itself, on numbers small enough to check by hand."""
    layout = small_layout(top_k=2, hot_size=2, req_slots=1, max_steps=2, max_seq_len=16)
    sw, host, dev = make_cache(layout)
    sw.state.slot_tokens[0, 0] = torch.tensor([5, 7], dtype=torch.int32)
    sw.state.slot_stamp[0, 0] = torch.tensor([3, 1])
    sw.state.clock[0, 0] = 3
    sw.state.tail_tokens[0] = torch.tensor([8, -1], dtype=torch.int32)  # token 8 in tail slot 0
    tokens = torch.tensor([[[5, 8], [9, 4]]], dtype=torch.int32)  # 5 hit, 8 tail, 4 and 9 miss
    call, errors = _reference_swap(sw, tokens, torch.tensor([0]), torch.tensor([[16, 16]]), 1,
                                   0, host, dev)  # fmt: skip
    assert errors == 0
    rows = sw.state.slot_rows[0].tolist()  # hot 0-1, tail 2-3, scratch 4-5
    # misses ascending: 4 takes the only unhit slot (1, holding 7); 9 goes to scratch slot 4
    assert call.out.tolist() == [[[rows[0], rows[2]], [rows[4], rows[1]]]]
    assert call.miss_count.tolist() == [2] and call.hits.tolist() == [1]
    assert call.miss_dst[0, :2].tolist() == [rows[1], rows[4]]
    assert sw.state.slot_tokens[0, 0].tolist() == [5, 4]
    assert sw.state.slot_stamp[0, 0].tolist() == [4, 4] and int(sw.state.clock[0, 0]) == 4


# ------------------------------------------------------------------------------ planned copy
def _plan(seed, bs, width, stride, host_rows, dev_rows):
    gen = torch.Generator().manual_seed(seed)
    src_store = torch.full((bs, stride), -1, dtype=torch.int64)
    dst_store = torch.full((bs, stride), -1, dtype=torch.int32)
    src, dst = src_store[:, :width], dst_store[:, :width]  # rows padded apart when stride > width
    src.copy_(torch.randint(0, host_rows, (bs, width), generator=gen))
    dst.copy_(torch.randperm(dev_rows, generator=gen)[: bs * width].view(bs, width).int())
    count = torch.randint(0, width + 1, (bs,), generator=gen, dtype=torch.int32)
    return src, dst, count


@pytest.mark.parametrize(
    "row_bytes, dev_offset",
    [(16, 0), (24, 0), (12, 0), (3, 0), (16, 4)],  # 16-, 8-, 4-byte words, bytes; misaligned
)
@pytest.mark.parametrize("num_real", [3, 2, 0])
def test_planned_copy_equals_the_reference(row_bytes, dev_offset, num_real):
    bs, width = 3, 6
    src, dst, count = _plan(row_bytes + num_real, bs, width, width + 2, 30, 40)
    gen = torch.Generator().manual_seed(row_bytes)
    host = torch.randint(0, 256, (30, row_bytes), generator=gen, dtype=torch.uint8)
    copies = {}
    for name in ("reference", "torch", "triton", "wrapper-torch", "wrapper-triton"):
        storage = torch.zeros(40 * row_bytes + dev_offset, dtype=torch.uint8)
        dev = storage[dev_offset:].view(40, row_bytes)
        copy = PlannedCopy(miss_src=src, miss_dst=dst, miss_count=count, host_cache=host,
                           device_buffer=dev, num_real=torch.tensor([num_real], dtype=torch.int32),
                           num_real_int=num_real)  # fmt: skip
        if name == "reference":
            copy_planned_reference(copy)
        elif name == "torch":
            copy_planned_torch(copy)
        elif name == "triton":
            copy_planned_triton(copy, num_chunks=2, block_m=2)
        else:
            copy_cache_planned(src, dst, count, num_real, host, dev,
                               backend=name.removeprefix("wrapper-"))  # fmt: skip
        copies[name] = dev.clone()
    for name, dev in copies.items():
        assert torch.equal(dev, copies["reference"]), name
    pairs = planned_rows_reference(copy)
    got_src, got_dst = planned_rows(src, dst, count, num_real)
    assert list(zip(got_src.tolist(), got_dst.tolist(), strict=True)) == pairs


def test_copy_wrapper_rejects_a_bad_backend_as_sr116():
    src, dst, count = _plan(0, 1, 2, 2, 4, 4)
    host = torch.zeros(4, 4, dtype=torch.int32)
    with pytest.raises(Exception) as info:
        copy_cache_planned(src, dst, count, 1, host, host.clone(), backend="cuda")
    assert info.value.code == "SR116"
