"""Property test: random call sequences keep every swap invariant (torch path)."""

import torch
from hypothesis import given, settings
from hypothesis import strategies as st
from specreg_hisparse.kernels.planned_copy import copy_cache_planned
from specreg_hisparse.swapper import PADDED_ROW_LOCATION

from tests.support.hisparse import ROW_ELEMS, host_rows_of, make_cache, small_layout

PROFILE = settings(max_examples=60, derandomize=True, deadline=None)


@st.composite
def scenarios(draw):
    top_k = draw(st.integers(1, 64))
    max_steps = draw(st.integers(1, 8))
    hot = draw(st.integers(top_k, top_k * 2))
    calls = draw(st.integers(1, 5))
    seed = draw(st.integers(0, 2**31 - 1))
    return top_k, hot, max_steps, calls, seed


def _rand(gen, low, high, shape=()):
    return torch.randint(low, high, shape, generator=gen)


def _check_call(swapper, host, dev, tokens, req, seq, num_real, locs, hot_before, tail_before):
    bs, steps, _ = tokens.shape
    plan = swapper.last_plan
    real = torch.arange(bs) < num_real
    assert torch.all(locs[~real] == PADDED_ROW_LOCATION)
    assert plan.miss_count[~real].eq(0).all()
    valid = (tokens >= 0) & (tokens < seq[:, :, None]) & real[:, None, None]
    assert torch.equal(locs >= 0, valid | ~real[:, None, None])
    # nothing lost: every valid entry's row holds its token's host row, byte for byte
    rows = host_rows_of(swapper, req, tokens)
    assert torch.equal(dev[locs[valid].long()], host[rows[valid]])
    for b in range(int(num_real)):
        tok_b, loc_b = tokens[b][valid[b]], locs[b][valid[b]]
        # one token, one row across the steps of the call (and distinct tokens, distinct rows)
        pairs = torch.stack([tok_b, loc_b], 1).unique(dim=0)
        assert pairs[:, 0].unique().numel() == pairs.shape[0] == pairs[:, 1].unique().numel()
        # misses: distinct tokens neither in the tail nor in the hot buffer before the call
        uniq = tok_b.unique()
        slot = int(req[b])
        in_tail = tail_before[slot][uniq % swapper.layout.page_size] == uniq
        in_hot = torch.isin(uniq, hot_before[slot])
        assert int(plan.miss_count[b]) == int((~in_tail & ~in_hot).sum())
    # no request's buffer holds a token twice
    for slot_tokens in swapper.slot_tokens.reshape(-1, swapper.layout.hot_size):
        held = slot_tokens[slot_tokens >= 0]
        assert held.unique().numel() == held.numel()
    # replaying the plan into a fresh buffer reproduces the same device rows
    fresh = torch.zeros_like(dev)
    copy_cache_planned(plan.miss_src, plan.miss_dst, plan.miss_count, num_real, host, fresh)
    cols = torch.arange(plan.miss_src.shape[1])
    copied = plan.miss_dst[cols[None, :] < plan.miss_count[:, None].long()].long()
    assert torch.equal(fresh[copied], dev[copied])


@PROFILE
@given(scenarios())
def test_random_call_sequences_keep_invariants(scenario):
    top_k, hot, max_steps, calls, seed = scenario
    layout = small_layout(top_k=top_k, hot_size=hot, max_steps=max_steps, req_slots=3,
                          max_seq_len=4 * top_k + 16)  # fmt: skip
    swapper, host, dev = make_cache(layout)
    gen = torch.Generator().manual_seed(seed)
    max_seq = layout.max_seq_len
    for _ in range(calls):
        bs = int(_rand(gen, 1, 4))
        num_real = int(_rand(gen, 0, bs + 1))
        req = torch.randperm(3, generator=gen)[:bs]
        if bs > num_real:  # padding rows may repeat a real row's slot
            req[num_real:] = req[0]
        steps = int(_rand(gen, 1, max_steps + 1))
        k = int(_rand(gen, 1, top_k + 1))
        seq = _rand(gen, 1, max_seq + 1, (bs, steps))
        # new tokens in the tail for some rows: the last `steps` positions of the first step
        for b in range(num_real):
            if bool(_rand(gen, 0, 2)):
                pos = torch.arange(steps) + int(seq[b, 0]) - 1
                pos = pos[pos < max_seq]
                kv = _rand(gen, 0, 1000, (pos.numel(), ROW_ELEMS)).int()
                swapper.write_tail(req[b].repeat(pos.numel()), pos, kv, host_cache=host,
                                   device_buffer=dev)  # fmt: skip
        # overlapping tokens: a small pool around the sequence end, with -1 and >= seq_len
        tokens = _rand(gen, -1, min(max_seq, 2 * top_k + 8), (bs, steps, k)).int()
        hot_before = swapper.slot_tokens[0].clone()
        tail_before = swapper.tail_tokens.clone()
        locs = swapper.swap(tokens, req, seq, num_real, host_cache=host, device_buffer=dev)
        _check_call(swapper, host, dev, tokens, req, seq, num_real, locs, hot_before, tail_before)
