"""HiSparse's swap at production sizes against the plain reference rule: hot buffers of 2,048
and 4,096 slots with hundreds of misses per row, on the torch path with numpy (introselect
partition + sort of the victim keys) and without it (torch.topk), and the victim selection
itself against a full sort.

Small hot buffers hide an unsorted victim prefix: numpy's partition returns small rows sorted
(it falls back to insertion sort), so only rows of production length show whether the k
smallest keys are put in (stamp, slot) order before misses take them.
"""

import numpy
import pytest
import specreg_hisparse.kernels.swap.torch_impl as swap_torch_impl
import torch

from tests.hisparse.test_reference import STATE, _reference_swap
from tests.support.hisparse import make_cache, small_layout


@pytest.mark.parametrize("hot", [2048, 4096])
@pytest.mark.parametrize("k", [1, 2, 37, 300, 2048])
def test_victim_keys_are_the_k_smallest_in_order(hot, k):
    """`_smallest_sorted` (numpy and torch branches) equals a full sort's prefix, on keys laid
    out as the swap builds them: slot ids under stamps with many ties, hit slots pushed last."""
    gen = torch.Generator().manual_seed(hot + k)
    stamps = torch.randint(-1, 6, (3, hot), generator=gen)
    keys = (torch.arange(hot) + (1 << 20)) + stamps * (1 << 20)
    keys += (torch.rand(3, hot, generator=gen) < 0.3).long() * (1 << 40)
    want = keys.sort(dim=1).values[:, :k]
    assert torch.equal(swap_torch_impl._smallest_sorted(keys, k), want)
    assert torch.equal(keys.topk(k, dim=1, largest=False, sorted=True).values, want)


def test_numpy_partition_leaves_production_rows_unsorted():
    """The premise of the test above: a partition of a 2,048-slot row is not sorted by itself."""
    keys = numpy.random.default_rng(0).permutation(2048)[None]
    part = numpy.partition(keys, 299, axis=1)[:, :300]
    assert not (numpy.diff(part, axis=1) > 0).all()


def _production_calls(layout, seed, n_calls, bs=2):
    """Calls whose tokens spread over a long sequence: hundreds of misses per row, partial hits,
    repeated tokens across steps, tokens past seq_len and -1 entries."""
    gen = torch.Generator().manual_seed(seed)
    steps, top_k, cap = layout.max_steps, layout.top_k, layout.max_seq_len
    out = []
    for _ in range(n_calls):
        tokens = torch.randint(0, cap, (bs, steps, top_k), generator=gen, dtype=torch.int32)
        tokens[:, :, :8] = -1
        seq = torch.randint(cap // 2, cap + 1, (bs, steps), generator=gen)
        out.append((tokens, torch.arange(bs), seq))
    return out


@pytest.mark.parametrize("numpy_path", [True, False])
@pytest.mark.parametrize(("hot", "top_k", "steps", "cap"), [(2048, 256, 2, 8192),
                                                              (4096, 512, 1, 16384)])
def test_swap_at_production_sizes_equals_the_reference(monkeypatch, numpy_path, hot, top_k,
                                                       steps, cap):
    layout = small_layout(hot_size=hot, top_k=top_k, max_steps=steps, max_seq_len=cap,
                          req_slots=2)  # fmt: skip
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "torch")
    if not numpy_path:
        monkeypatch.setattr(swap_torch_impl, "numpy", None)
    ref, ref_host, ref_dev = make_cache(layout)
    sw, host, dev = make_cache(layout)
    misses = []
    for tokens, req, seq in _production_calls(layout, hot + top_k, n_calls=4):
        want, errors = _reference_swap(ref, tokens, req, seq, 2, 0, ref_host, ref_dev)
        assert errors == 0
        locs = sw.swap(tokens, req, seq, 2, layer=0, host_cache=host, device_buffer=dev)
        assert torch.equal(locs, want.out)
        assert torch.equal(sw.last_plan.miss_src, want.miss_src)
        assert torch.equal(sw.last_plan.miss_dst, want.miss_dst)
        assert torch.equal(sw.last_stats.hits, want.hits)
        for name in STATE:
            assert torch.equal(getattr(sw.state, name), getattr(ref.state, name)), name
        assert torch.equal(dev, ref_dev)
        misses.append(int(want.miss_count.min()))
    assert min(misses) >= 100 and int(sw.state.slot_stamp.max()) == 4  # several misses a row


@pytest.mark.parametrize("impl", ["torch", "torch-no-numpy", "triton"])
def test_a_tail_slot_holding_a_token_of_another_page_position_is_no_hit(monkeypatch, impl):
    """Rule 3 reads token t from tail slot t % page only. Tail slot 0 of request 0 holds token
    5 (whose slot is 1, holding 9): a read of 5 is a miss served from the host, not slot 0's
    row; 9 and 2 sit in their own slots (tail reads without IO); slot 3 is empty (-1), so 7
    misses. Hot slot 0 also holds 9: the tail wins (rule 2), so that slot is not hit.
    Request 1's tail holds token 0 in slot 0 (a hit: position 0 is a position) and, in slot 1,
    17, a position past max_seq_len (16) that no read can match: 1, 2 and 3 miss. States that
    write_tail cannot produce, but the rule is defined on any state. Every impl against the
    reference."""
    from tests.hisparse.test_reference import _use

    layout = small_layout(top_k=4, hot_size=4, page_size=4, req_slots=2, max_steps=1,
                          max_seq_len=16)  # fmt: skip
    tokens = torch.tensor([[[5, 9, 2, 7]], [[0, 1, 2, 3]]], dtype=torch.int32)
    req, seq = torch.tensor([0, 1]), torch.tensor([[16], [16]])
    ref, ref_host, ref_dev = make_cache(layout)
    _use(impl, monkeypatch)
    sw, host, dev = make_cache(layout)
    for cache in (ref, sw):
        cache.state.tail_tokens[0] = torch.tensor([5, 9, 2, -1], dtype=torch.int32)
        cache.state.tail_tokens[1] = torch.tensor([0, 17, -1, -1], dtype=torch.int32)
        cache.state.slot_tokens[0, 0, 0] = 9
    want, errors = _reference_swap(ref, tokens, req, seq, 2, 0, ref_host, ref_dev)
    assert errors == 0 and want.miss_count.tolist() == [2, 3]
    tail_rows = ref.state.slot_rows[0, layout.hot_size:].tolist()
    assert want.out[0, 0, 1:3].tolist() == tail_rows[1:3] and want.hits.tolist() == [0, 0]
    locs = sw.swap(tokens, req, seq, 2, layer=0, host_cache=host, device_buffer=dev)
    assert torch.equal(locs, want.out)
    assert torch.equal(sw.last_plan.miss_src, want.miss_src)
    assert torch.equal(sw.last_plan.miss_dst, want.miss_dst)
    assert torch.equal(sw.last_stats.hits, want.hits)
    for name in STATE:
        assert torch.equal(getattr(sw.state, name), getattr(ref.state, name)), name
    assert torch.equal(dev, ref_dev)
