"""Hand-built cases for every swap rule (torch path)."""

import pytest
import torch
from specreg_hisparse.kernels.planned_copy import copy_cache_planned
from specreg_hisparse.swapper import PADDED_ROW_LOCATION

from specreg.errors import CacheMissError, KernelInputError
from tests.support.hisparse import ROW_ELEMS, host_rows_of, make_cache, small_layout


def t32(rows):
    return torch.tensor(rows, dtype=torch.int32)


@pytest.fixture
def cache():
    return make_cache(small_layout())


def swap(cache, tokens, seq_lens, req=None, num_real=None, **kw):
    swapper, host, dev = cache
    tokens = t32(tokens)
    req = torch.arange(tokens.shape[0]) if req is None else torch.tensor(req)
    seq = torch.tensor(seq_lens)
    return swapper.swap(tokens, req, seq, num_real, host_cache=host, device_buffer=dev, **kw)


def assert_served(cache, tokens, locs, req=None):
    swapper, host, dev = cache
    tokens = t32(tokens)
    req = torch.arange(tokens.shape[0]) if req is None else torch.tensor(req)
    ok = locs >= 0
    rows = host_rows_of(swapper, req, tokens)
    assert torch.equal(dev[locs[ok].long()], host[rows[ok]])


def test_padding_and_tokens_past_seq_len_give_minus_one(cache):
    locs = swap(cache, [[3, -1, 9, 10]], [10])
    assert locs[0, 1] == -1 and locs[0, 3] == -1
    assert locs[0, 0] >= 0 and locs[0, 2] >= 0
    assert_served(cache, [[3, -1, 9, 10]], locs)


def test_seq_len_is_per_step(cache):
    locs = swap(cache, [[[5, 6], [5, 6]]], [[6, 7]])
    assert locs[0, 0, 1] == -1 and locs[0, 1, 1] >= 0


def test_padded_rows_get_safe_value_no_misses_and_no_state_change(cache):
    swapper = cache[0]
    before = swapper.slot_tokens.clone()
    locs = swap(cache, [[1, 2, 3, 4], [5, 6, 7, 8]], [20, 20], req=[1, 2], num_real=1)
    assert torch.all(locs[1] == PADDED_ROW_LOCATION)
    assert swapper.last_plan.miss_count.tolist() == [4, 0]
    assert torch.equal(swapper.slot_tokens[:, 2], before[:, 2])
    tensor_real = swap(cache, [[1, 2, 3, 4], [5, 6, 7, 8]], [20, 20], req=[1, 1],
                       num_real=torch.tensor([1], dtype=torch.int32))  # fmt: skip
    assert torch.all(tensor_real[1] == PADDED_ROW_LOCATION)


def test_tail_tokens_resolve_to_tail_rows_without_io(cache):
    swapper, host, dev = cache
    req, pos = torch.tensor([0, 0]), torch.tensor([20, 21])
    kv = torch.full((2, ROW_ELEMS), 7, dtype=torch.int32)
    rows = swapper.write_tail(req, pos, kv, host_cache=host, device_buffer=dev)
    layout = swapper.layout
    expected = swapper.slot_rows[0, layout.hot_size + pos % layout.page_size]
    assert torch.equal(rows, expected.long())
    locs = swap(cache, [[20, 21, -1, -1]], [22])
    assert locs[0, :2].tolist() == rows.tolist()
    assert swapper.last_plan.miss_count.tolist() == [0]
    assert torch.equal(host[swapper.host_cache_locs[0, 20]], kv[0])


def test_hit_returns_its_row_and_copies_nothing(cache):
    swapper = cache[0]
    first = swap(cache, [[1, 2, 3, 4]], [10])
    second = swap(cache, [[4, 3, 2, 1]], [10])
    assert second[0].tolist() == first[0].flip(0).tolist()
    assert swapper.last_plan.miss_count.tolist() == [0]
    assert swapper.last_stats.hits.tolist() == [4]


def test_token_without_host_copy_raises_sr409_and_changes_nothing():
    cache = make_cache(small_layout(), host_tokens=10)
    swapper = cache[0]
    before = swapper.slot_tokens.clone()
    with pytest.raises(CacheMissError) as info:
        swap(cache, [[1, 12, -1, -1]], [20])
    assert info.value.code == "SR409" and "token 12" in str(info.value)
    assert torch.equal(swapper.slot_tokens, before)


def test_same_token_in_several_steps_is_copied_once_with_one_location(cache):
    swapper = cache[0]
    tokens = [[[1, 2, 3, 4], [4, 5, 1, 6], [6, 1, 7, 2]]]
    locs = swap(cache, tokens, [[20, 20, 20]])
    assert swapper.last_plan.miss_count.tolist() == [7]
    flat = t32(tokens).flatten()
    for token in flat.unique():
        assert locs.flatten()[flat == token].unique().numel() == 1
    assert locs.flatten().unique().numel() == 7
    assert swapper.last_stats.bytes_copied.tolist() == [7 * swapper.layout.row_bytes]
    assert_served(cache, tokens, locs)


def test_call_tokens_are_never_evicted_by_the_call_overflow_uses_scratch(cache):
    swapper = cache[0]
    tokens = [[[0, 1, 2, 3], [4, 5, 6, 7], [8, 9, 10, 11]]]  # 12 distinct > hot 8
    locs = swap(cache, tokens, [[20, 20, 20]])
    assert locs.flatten().unique().numel() == 12
    assert_served(cache, tokens, locs)
    layout = swapper.layout
    scratch = swapper.slot_rows[0, layout.scratch_start :]
    assert torch.isin(locs.flatten(), scratch).sum() == 4
    # the hot buffer keeps the lowest 8 tokens, the rest are served once from scratch
    assert sorted(swapper.slot_tokens[0, 0].tolist()) == list(range(8))


def test_lru_evicts_least_recently_used_and_call_tokens_become_most_recent(cache):
    swapper = cache[0]
    swap(cache, [[0, 1, 2, 3]], [30])
    swap(cache, [[4, 5, 6, 7]], [30])  # hot buffer full: 0..7
    swap(cache, [[0, 1, -1, -1]], [30])  # 0, 1 most recent now
    swap(cache, [[8, 9, 10, 11]], [30])  # evicts the oldest: 2, 3, 4, 5
    held = set(swapper.slot_tokens[0, 0].tolist())
    assert held == {0, 1, 6, 7, 8, 9, 10, 11}
    swap(cache, [[12, 13, -1, -1]], [30])  # oldest now 6, 7
    assert set(swapper.slot_tokens[0, 0].tolist()) == {0, 1, 8, 9, 10, 11, 12, 13}


def test_reset_request_forgets_buffer_tail_and_host_locations(cache):
    swapper = cache[0]
    swap(cache, [[1, 2, 3, 4]], [10])
    swapper.reset_request(0)
    assert torch.all(swapper.slot_tokens[:, 0] == -1)
    assert torch.all(swapper.tail_tokens[0] == -1)
    assert torch.all(swapper.host_cache_locs[0] == -1)
    with pytest.raises(KernelInputError) as info:
        swapper.reset_request(99)
    assert info.value.code == "SR903"


def test_rewritten_positions_drop_stale_hot_copies(cache):
    swapper, host, dev = cache
    swap(cache, [[5, 6, -1, -1]], [10])
    assert 5 in swapper.slot_tokens[0, 0].tolist()
    kv = torch.full((1, ROW_ELEMS), 3, dtype=torch.int32)
    swapper.write_tail(torch.tensor([0]), torch.tensor([5]), kv, host_cache=host, device_buffer=dev)
    assert 5 not in swapper.slot_tokens[0, 0].tolist()


def test_single_step_shapes_and_seq_len_forms(cache):
    two_d = swap(cache, [[1, 2, 3, 4]], [10])
    assert two_d.shape == (1, 4)
    flat = swap(cache, [[[1, 2, 3, 4], [1, 2, 3, 4]]], [10, 10])
    assert flat.shape == (1, 2, 4) and torch.equal(flat[0, 0], two_d[0])


def test_steps_above_capacity_is_sr400(cache):
    with pytest.raises(KernelInputError) as info:
        swap(cache, [[[1] * 4] * 4], [[10] * 4])
    assert info.value.code == "SR400" and "max_steps=4" in info.value.problems[0].fix


def test_top_k_wider_than_layout_is_sr412(cache):
    with pytest.raises(KernelInputError) as info:
        swap(cache, [[1, 2, 3, 4, 5]], [10])
    assert info.value.code == "SR412"


def test_repeated_request_slot_is_sr410(cache):
    with pytest.raises(KernelInputError) as info:
        swap(cache, [[1, 2, 3, 4], [1, 2, 3, 4]], [10, 10], req=[1, 1])
    assert info.value.code == "SR410"


@pytest.mark.parametrize(
    "kwargs, code",
    [
        ({"tokens": torch.zeros(1, 4)}, "SR901"),
        ({"tokens": torch.zeros(1, 1, 1, 4, dtype=torch.int32)}, "SR900"),
        ({"seq": torch.tensor([10, 10, 10])}, "SR900"),
        ({"req": torch.tensor([0, 1])}, "SR900"),
        ({"req": torch.tensor([9])}, "SR903"),
        ({"layer": 3}, "SR903"),
        ({"num_real": 5}, "SR904"),
        ({"dev": torch.zeros(60, 4, dtype=torch.int16)}, "SR411"),
        ({"dev": torch.zeros(5, 4, dtype=torch.int32)}, "SR900"),
    ],
)
def test_invalid_inputs_have_codes(cache, kwargs, code):
    swapper, host, dev = cache
    args = {"tokens": t32([[1, 2, 3, 4]]), "req": torch.tensor([0]), "seq": torch.tensor([10]),
            "num_real": None, "layer": 0, "dev": dev}  # fmt: skip
    args.update(kwargs)
    with pytest.raises(KernelInputError) as info:
        swapper.swap(args["tokens"], args["req"], args["seq"], args["num_real"],
                     layer=args["layer"], host_cache=host, device_buffer=args["dev"])  # fmt: skip
    assert info.value.code == code


def plan_buffers(bs=1, cap=12):
    return (torch.empty(bs, cap, dtype=torch.int64), torch.empty(bs, cap, dtype=torch.int32),
            torch.empty(bs, dtype=torch.int32))  # fmt: skip


def test_recorded_plan_fills_caller_buffers_and_replays(cache):
    swapper, host, dev = cache
    src, dst, count = plan_buffers(cap=16)
    tokens = [[[1, 2, 3, 4], [3, 4, 5, 6], [9, 9, 1, -1]]]
    locs = swap(cache, tokens, [[20, 20, 20]], record_plan=True, miss_src=src, miss_dst=dst,
                miss_count=count)  # fmt: skip
    assert count.tolist() == [7]
    assert sorted(
        host_rows_of(swapper, torch.tensor([0]), t32(tokens))[locs >= 0].unique().tolist()
    ) == sorted(src[0, :7].tolist())
    other_host = host * 10
    other_dev = torch.zeros_like(dev)
    copy_cache_planned(src, dst, count, 1, other_host, other_dev)
    ok = locs >= 0
    rows = host_rows_of(swapper, torch.tensor([0]), t32(tokens))
    assert torch.equal(other_dev[locs[ok].long()], other_host[rows[ok]])


@pytest.mark.parametrize(
    "plan, code",
    [
        (lambda s, d, c: (s, None, c), "SR407"),
        (lambda s, d, c: (s.int(), d, c), "SR901"),
        (lambda s, d, c: (s, d.long(), c), "SR901"),
        (lambda s, d, c: (s, d, c.long()), "SR901"),
        (lambda s, d, c: (s[:, :8], d[:, :8], c), "SR900"),
        (lambda s, d, c: (s, d, torch.zeros(2, dtype=torch.int32)), "SR900"),
        (lambda s, d, c: (s, torch.empty(1, 24, dtype=torch.int32)[:, :12], c), "SR408"),
    ],
)
def test_invalid_plans_have_codes(cache, plan, code):
    swapper, host, dev = cache
    src, dst, count = plan(*plan_buffers())
    with pytest.raises(KernelInputError) as info:
        swapper.swap(t32([[[1, 2, 3, 4]] * 3]), torch.tensor([0]), torch.tensor([[9, 9, 9]]),
                     host_cache=host, device_buffer=dev, record_plan=True, miss_src=src,
                     miss_dst=dst, miss_count=count)  # fmt: skip
    assert info.value.code == code


def test_plan_buffers_without_record_plan_is_sr407(cache):
    swapper, host, dev = cache
    src, dst, count = plan_buffers()
    with pytest.raises(KernelInputError) as info:
        swapper.swap(t32([[1, 2, 3, 4]]), torch.tensor([0]), torch.tensor([9]), host_cache=host,
                     device_buffer=dev, miss_src=src, miss_dst=dst, miss_count=count)  # fmt: skip
    assert info.value.code == "SR407"


def test_replay_rejects_partial_plan_and_row_size_mismatch(cache):
    _, host, dev = cache
    src, dst, count = plan_buffers()
    with pytest.raises(KernelInputError) as info:
        copy_cache_planned(src, dst, None, 1, host, dev)
    assert info.value.code == "SR407"
    with pytest.raises(KernelInputError) as info:
        copy_cache_planned(src, dst, count, 1, host, dev[:, :2].contiguous())
    assert info.value.code == "SR411"
    count.fill_(1)
    src.fill_(10**6)
    with pytest.raises(KernelInputError) as info:
        copy_cache_planned(src, dst, count, 1, host, dev)
    assert info.value.code == "SR903"


def test_counters_accumulate_without_reading_back(cache):
    swapper = cache[0]
    swap(cache, [[1, 2, 3, 4]], [10])
    swap(cache, [[1, 2, 5, -1]], [10])
    assert swapper.totals.tolist() == [2, 5, 5 * swapper.layout.row_bytes]


def test_layers_keep_separate_state_and_rewrites_clear_every_layer():
    swapper, host, dev = make_cache(small_layout(layers=2))
    req, seq = torch.tensor([0]), torch.tensor([10])
    swapper.swap(t32([[5, 6, -1, -1]]), req, seq, host_cache=host, device_buffer=dev, layer=1)
    assert torch.all(swapper.slot_tokens[0] == -1)
    swapper.swap(t32([[5, 7, -1, -1]]), req, seq, host_cache=host, device_buffer=dev, layer=0)
    assert {5, 6} <= set(swapper.slot_tokens[1, 0].tolist())
    kv = torch.zeros((1, ROW_ELEMS), dtype=torch.int32)
    swapper.write_tail(torch.tensor([0]), torch.tensor([5]), kv, host_cache=host, device_buffer=dev)
    assert 5 not in swapper.slot_tokens[:, 0].flatten().tolist()
    assert 6 in swapper.slot_tokens[1, 0].tolist() and 7 in swapper.slot_tokens[0, 0].tolist()
    held = swapper.slot_tokens >= 0
    assert torch.all(swapper.state.slot_stamp[~held] == -1)


def test_writing_one_position_twice_in_a_call_is_sr904(cache):
    swapper, host, dev = cache
    kv = torch.zeros((2, ROW_ELEMS), dtype=torch.int32)
    with pytest.raises(KernelInputError) as info:
        swapper.write_tail(torch.tensor([1, 1]), torch.tensor([4, 4]), kv, host_cache=host,
                           device_buffer=dev)  # fmt: skip
    assert info.value.code == "SR904"


def test_a_shared_host_location_map_is_the_swappers_own():
    """A server's own token -> host row map (SGLang's req_to_host_pool) is used in place, not
    copied: what the server writes there the swap reads, and the swapper's writes land there."""
    from specreg_hisparse.sizes import compute_layout
    from specreg_hisparse.swapper import HiSparseSwapper

    layout, problems = compute_layout(4, 8, None, 2, 2, row_bytes=8, max_seq_len=32)
    assert not problems
    shared = torch.full((2, 32), -1, dtype=torch.int64)
    swapper = HiSparseSwapper(layout, host_cache_locs=shared)
    assert swapper.host_cache_locs is shared
    host, dev = swapper.new_host_cache(), swapper.new_device_buffer()
    shared[0, :10] = torch.arange(10)  # the server backs tokens 0..9 up itself
    host[:10] = torch.arange(10, dtype=torch.uint8)[:, None]
    locs = swapper.swap(torch.tensor([[3, 7, 9, -1]]), torch.tensor([0]), torch.tensor([10]),
                        host_cache=host, device_buffer=dev)
    assert dev[locs[0, :3].long(), 0].tolist() == [3, 7, 9]
    swapper.set_host_locs(torch.tensor([1]), torch.tensor([5]), torch.tensor([20]))
    assert int(shared[1, 5]) == 20
    for bad in (torch.zeros((2, 32), dtype=torch.int32), torch.zeros((2, 31), dtype=torch.int64),
                torch.zeros((32, 2), dtype=torch.int64).t()):
        with pytest.raises(KernelInputError):
            HiSparseSwapper(layout, host_cache_locs=bad)


def test_the_swap_writes_a_given_output_buffer_in_place():
    from specreg_hisparse.sizes import compute_layout
    from specreg_hisparse.swapper import HiSparseSwapper

    layout, _ = compute_layout(4, 8, None, 2, 2, row_bytes=8, max_seq_len=32)
    swapper = HiSparseSwapper(layout)
    pos = torch.arange(16)
    swapper.set_host_locs(torch.zeros_like(pos), pos, pos)
    host, dev = swapper.new_host_cache(), swapper.new_device_buffer()
    tokens, req, seq = torch.tensor([[[1, 2, 3, -1], [4, 5, 1, 2]]]), torch.tensor([0]), torch.tensor([[9, 9]])
    graph_stable = torch.full((2, 2, 4), 7, dtype=torch.int32)
    got = swapper.swap(tokens, req, seq, host_cache=host, device_buffer=dev, out=graph_stable[:1])
    assert got.data_ptr() == graph_stable.data_ptr() and int(got[0, 0, 3]) == -1
    assert graph_stable[1].eq(7).all()  # the rest of the buffer is untouched
    for bad in (torch.empty((1, 2, 4), dtype=torch.int64), torch.empty((1, 2, 8), dtype=torch.int32)[..., ::2]):
        with pytest.raises(KernelInputError):
            swapper.swap(tokens, req, seq, host_cache=host, device_buffer=dev, out=bad)
