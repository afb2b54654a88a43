"""The SGLang-signature kernels of `tree_verify`, without SGLang: filtering against specreg's
filtering reference, min-p per request, the verify-call context and SGLang's output contract.
(`test_sglang_tree_verify.py` runs them inside SGLang against its Triton kernels.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from specreg_eagle.kernels.verify_greedy import verify_tree_greedy

from specreg.adapters import sglang_tree_kernels as kernels
from specreg.errors import KernelInputError
from specreg.kernels.filtering.reference import filtered_distribution


def rows(count: int, vocab: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn((count, vocab), generator=gen) * 3.0
    logits[::4, : vocab // 2] = logits[::4, :1]  # ties, some at a cut
    return torch.softmax(logits, -1)


def reference(p: torch.Tensor, **filters) -> torch.Tensor:
    return torch.stack([filtered_distribution(row, temperature=1.0, probabilities=True, **filters)
                        for row in p]).to(torch.float32)


@pytest.mark.parametrize("filters", [
    {"top_k": 5}, {"top_p": 0.8}, {"min_p": 0.1}, {"top_k": 20, "top_p": 0.6, "min_p": 0.05},
])
def test_filter_probs_keeps_the_reference_set_and_renormalises(filters):
    p = rows(64, 48, seed=3)
    tensors = {name: torch.full((64,), value) for name, value in filters.items()}
    ours, expected = kernels.filter_probs(p, **tensors), reference(p, **filters)
    assert torch.equal(ours > 0, expected > 0)
    torch.testing.assert_close(ours, expected, atol=1e-6, rtol=1e-5)


def test_sglangs_sequence_of_renorms_then_min_p_is_the_combined_rule():
    p = rows(64, 48, seed=4)
    step = kernels.top_k_renorm_prob(p, torch.full((64, 1), 20, dtype=torch.int32))
    step = kernels.top_p_renorm_prob(step, torch.full((64,), 0.6))
    step = kernels.filter_probs(step, min_p=torch.full((64,), 0.05))
    expected = reference(p, top_k=20, top_p=0.6, min_p=0.05)
    assert torch.equal(step > 0, expected > 0)
    torch.testing.assert_close(step, expected, atol=1e-6, rtol=1e-5)


def test_sglangs_all_tokens_top_k_keeps_every_token():
    p = rows(8, 16, seed=5)
    torch.testing.assert_close(kernels.top_k_renorm_prob(p, kernels.SGLANG_TOP_K_ALL), p)


def test_min_p_touches_only_the_requests_that_ask_for_it():
    b, n, vocab = 4, 3, 16
    p = rows(b * n, vocab, seed=6).view(b, n, vocab)
    info = SimpleNamespace(need_min_p_sampling=True, min_ps=torch.tensor([0.0, 0.2, 0.0, 0.4]))
    out = kernels.with_min_p(p, info)
    assert torch.equal(out[[0, 2]], p[[0, 2]])
    for r in (1, 3):
        expected = reference(p[r], min_p=float(info.min_ps[r]))
        torch.testing.assert_close(out[r], expected, atol=1e-6, rtol=1e-5)
    assert kernels.with_min_p(p, None) is p  # outside an eagle_sample call
    assert kernels.with_min_p(p, SimpleNamespace(need_min_p_sampling=False)) is p


def test_the_verify_call_context_holds_the_batch_only_during_the_call():
    batch = SimpleNamespace(sampling_info=object())
    seen = kernels.verify_call(lambda *a, **k: kernels.CURRENT_SAMPLING_INFO.get(), None, batch)
    assert seen is batch.sampling_info and kernels.CURRENT_SAMPLING_INFO.get() is None
    with pytest.raises(RuntimeError):
        kernels.verify_call(lambda *a, **k: (_ for _ in ()).throw(RuntimeError()), None, batch)
    assert kernels.CURRENT_SAMPLING_INFO.get() is None


def test_outputs_are_written_only_on_the_accepted_path_as_sglangs_kernels_write_them():
    b, n, depth = 2, 4, 3
    cand = torch.tensor([[5, 1, 2, 3], [5, 1, 2, 3]])
    index = torch.arange(b * n).view(b, n)
    nt = torch.tensor([[1, 2, 3, -1]] * b)
    ns = torch.full((b, n), -1)
    predict = torch.tensor([[1, 2, 0, 0], [0, 0, 0, 0]])  # request 0 accepts 2, request 1 none
    predicts = torch.full((b * n,), 77, dtype=torch.int32)
    accept_index = torch.full((b, depth + 1), 77, dtype=torch.int32)
    num = torch.full((b,), 77, dtype=torch.int32)
    kernels.verify_tree_greedy(predicts, accept_index, num, cand, index, nt, ns, predict)
    assert predicts.tolist() == [1, 2, 0, 77, 0, 77, 77, 77]
    assert accept_index.tolist() == [[0, 1, 2, 77], [4, 77, 77, 77]]
    assert num.tolist() == [2, 0]
    direct = verify_tree_greedy(cand, index, nt, ns, depth=depth, target_predict=predict)
    assert direct.accept_token_num.tolist() == [2, 0]


def test_bad_buffers_are_coded_before_anything_is_written():
    cand = torch.zeros((2, 4), dtype=torch.int64)
    links = (cand, torch.arange(8).view(2, 4), torch.full((2, 4), -1), torch.full((2, 4), -1))
    predicts = torch.full((8,), 77, dtype=torch.int32)
    with pytest.raises(KernelInputError) as info:
        kernels.verify_tree_greedy(predicts, torch.full((2, 4), -1, dtype=torch.int32),
                                   torch.zeros(3, dtype=torch.int32), *links, cand)
    assert info.value.problems[0].code == "SR900"
    assert predicts.tolist() == [77] * 8
