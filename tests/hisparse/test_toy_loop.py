"""End to end: a toy decode loop with two layers sharing one top-k selection (anchor + replay)."""

import torch
from specreg_hisparse.kernels.planned_copy import copy_cache_planned
from specreg_hisparse.swapper import HiSparseSwapper

from tests.support.hisparse import ROW_ELEMS, small_layout


def test_anchor_swap_and_sharing_layer_replay_read_the_written_kv():
    layout = small_layout(top_k=4, hot_size=8, max_steps=3, req_slots=2, max_seq_len=64)
    swapper = HiSparseSwapper(layout)
    hosts = [swapper.new_host_cache(ROW_ELEMS, torch.int32) for _ in range(2)]
    devs = [swapper.new_device_buffer(ROW_ELEMS, torch.int32) for _ in range(2)]
    gen = torch.Generator().manual_seed(7)
    req = torch.tensor([1, 0])
    for slot in req.tolist():
        swapper.reset_request(slot)
    seq_len = 0
    for _ in range(10):  # each step writes 3 verify positions, then attends with 3 steps
        steps = 3
        positions = torch.arange(seq_len, seq_len + steps)
        for layer in range(2):
            for b, slot in enumerate(req.tolist()):
                kv = (positions[:, None] * 100 + layer * 10 + b + torch.arange(ROW_ELEMS)).int()
                swapper.write_tail(torch.full((steps,), slot), positions, kv,
                                   host_cache=hosts[layer], device_buffer=devs[layer])  # fmt: skip
        seq_len += steps
        seq = torch.tensor([[seq_len - steps + s + 1 for s in range(steps)]] * 2)
        tokens = torch.randint(-1, seq_len, (2, steps, layout.top_k), generator=gen).int()
        locs = swapper.swap(tokens, req, seq, 2, layer=0, host_cache=hosts[0],
                            device_buffer=devs[0], record_plan=True)  # fmt: skip
        plan = swapper.last_plan
        copy_cache_planned(plan.miss_src, plan.miss_dst, plan.miss_count, 2, hosts[1], devs[1])
        valid = (tokens >= 0) & (tokens < seq[:, :, None])
        assert torch.equal(locs >= 0, valid)
        for layer in range(2):
            read = devs[layer][locs[valid].long()]
            b_idx = torch.arange(2)[:, None, None].expand_as(tokens)[valid]
            expected = (tokens[valid][:, None] * 100 + layer * 10 + b_idx[:, None]
                        + torch.arange(ROW_ELEMS)).int()  # fmt: skip
            assert torch.equal(read, expected)
