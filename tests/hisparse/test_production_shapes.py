"""The HiSparse swap at production shapes against the plain reference: hot buffers of 2,048 slots
and more, torch with and without numpy (the kernels' other production-shape tests are
tests/kernels/test_production_shapes.py).

A few seeded hypothesis examples; the shapes, not the example count, are the point.
"""

import specreg_hisparse.kernels.swap.torch_impl as swap_torch_impl
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from tests.hisparse.test_reference import STATE, _reference_swap
from tests.support.hisparse import make_cache, small_layout


@settings(max_examples=3, derandomize=True, deadline=None)
@given(hot=st.sampled_from([2048, 3000, 4096]), seed=st.integers(0, 2**31 - 1),
       numpy_path=st.booleans())
def test_hisparse_swap_with_hot_buffers_of_2048_and_more_equals_the_reference(hot, seed,
                                                                               numpy_path):
    top_k, cap = 256, 4 * hot
    layout = small_layout(hot_size=hot, top_k=top_k, max_steps=2, max_seq_len=cap, req_slots=2)
    ref, ref_host, ref_dev = make_cache(layout)
    sw, host, dev = make_cache(layout)
    saved = swap_torch_impl.numpy
    swap_torch_impl.numpy = saved if numpy_path else None
    try:
        gen = torch.Generator().manual_seed(seed)
        for _ in range(3):
            tokens = torch.randint(-1, cap, (2, 2, top_k), generator=gen, dtype=torch.int32)
            req, seq = torch.tensor([1, 0]), torch.randint(cap // 2, cap + 1, (2, 2), generator=gen)
            want, _ = _reference_swap(ref, tokens, req, seq, 2, 0, ref_host, ref_dev)
            locs = sw.swap(tokens, req, seq, 2, layer=0, host_cache=host, device_buffer=dev)
            assert torch.equal(locs, want.out)
            assert torch.equal(sw.last_plan.miss_dst, want.miss_dst)
            for name in STATE:
                assert torch.equal(getattr(sw.state, name), getattr(ref.state, name)), name
    finally:
        swap_torch_impl.numpy = saved
