"""The swap's CPU fast path uses numpy when present; torch alone must decide identically."""

import specreg_hisparse.kernels.swap.torch_impl as kernels
import torch

from tests.support.hisparse import make_cache, small_layout


def _run(calls, monkeypatch, use_numpy: bool):
    if not use_numpy:
        monkeypatch.setattr(kernels, "numpy", None)
    layout = small_layout(top_k=4, hot_size=8, req_slots=3, max_steps=3)
    swapper, host, dev = make_cache(layout)
    outputs = []
    for tokens, seq_lens in calls:
        locs = swapper.swap(tokens, torch.arange(3), seq_lens, host_cache=host,
                            device_buffer=dev, record_plan=True)
        plan = swapper.last_plan
        outputs.append((locs.clone(), plan.miss_src.clone(), plan.miss_dst.clone(),
                        plan.miss_count.clone(), swapper.slot_tokens.clone(), dev.clone()))
    monkeypatch.undo()
    return outputs


def test_torch_only_path_equals_the_numpy_path(monkeypatch):
    g = torch.Generator().manual_seed(7)
    calls = []
    for _ in range(12):
        tokens = torch.randint(-1, 40, (3, 3, 4), generator=g, dtype=torch.int32)
        seq_lens = torch.randint(20, 48, (3, 3), generator=g, dtype=torch.int32)
        calls.append((tokens, seq_lens))
    with_numpy = _run(calls, monkeypatch, use_numpy=True)
    torch_only = _run(calls, monkeypatch, use_numpy=False)
    assert kernels.numpy is not None  # restored
    for a, b in zip(with_numpy, torch_only, strict=True):
        for x, y in zip(a, b, strict=True):
            assert torch.equal(x, y)
