"""Emitted-token log-probabilities on chain results: torch and Triton (interpreter) against the
per-slot reference, which is plain decoding's filtered (or raw) distribution at each position."""

from __future__ import annotations

import math

import pytest
import torch

from specreg.testing.demo_params import mixed_demo_params
from specreg.errors import KernelInputError
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.logprobs import emitted_logprobs
from specreg.contract.protocols import VerifyResult


def _batch(seed, b=10, n=5, vocab=97):
    gen = torch.Generator().manual_seed(seed)
    target = 2 * torch.randn(b, n, vocab, generator=gen)
    candidates = torch.randint(0, vocab, (b, n), generator=gen)
    rows = torch.arange(b)[:, None]
    target[rows, torch.arange(n - 1)[None, :], candidates[:, 1:]] += 9.0  # drafts likely: accepted
    return candidates, target, mixed_demo_params(b)


def _plain(row, params, r, raw):
    """What plain decoding reports for row `row` of request r: its distribution's log."""
    t = float(params.temperature[r])
    if raw or t == 0:
        return torch.log_softmax(row.double(), -1)
    dist = filtered_distribution(row, temperature=t, top_k=int(params.top_k[r]),
                                 top_p=float(params.top_p[r]), min_p=float(params.min_p[r]))
    return torch.log(dist)


@pytest.mark.parametrize("backend", ["torch", "triton"])
@pytest.mark.parametrize("raw", [False, True])
def test_chain_logprobs_equal_plain_decoding(backend, raw):
    candidates, target, params = _batch(3)
    result = verify_chain_with_params(candidates, target, None, params=params)
    out = emitted_logprobs(result, target, params=params, top_n=4, raw=raw, backend=backend)
    b, n = candidates.shape
    checked = 0
    for r in range(b):
        emitted = int(result.accept_len[r]) + 1
        for j in range(n):
            if j >= emitted:
                assert math.isnan(float(out.token[r, j])) and int(out.top_tokens[r, j, 0]) == -1
                continue
            plain = _plain(target[r, j], params, r, raw)
            token = int(result.output_tokens[r, j])
            assert float(out.token[r, j]) == pytest.approx(float(plain[token]), abs=2e-5)
            score = target[r, j]  # among dropped tokens (all -inf): the higher score first
            best = sorted(range(plain.shape[0]), key=lambda v: (-float(plain[v]), -float(score[v])))[:4]
            assert out.top_tokens[r, j].tolist() == best
            got = out.top_logprobs[r, j].double()
            want = plain[best]
            finite = torch.isfinite(want)
            assert torch.equal(torch.isfinite(got), finite)  # dropped alternatives are -inf
            assert torch.allclose(got[finite], want[finite], atol=2e-5)
            checked += 1
    assert checked >= 20 and bool(result.accept_len.max() > 0)


def test_dropped_tokens_are_minus_inf_and_kept_mass_is_one():
    target = torch.tensor([[[3.0, 2.0, 1.0, 0.0], [0.0, 5.0, 0.0, 0.0]]])
    params = type(mixed_demo_params(1)).of(1, temperature=1.0, top_k=1)
    result = VerifyResult(num_accepted=torch.tensor([1], dtype=torch.int32),
                          output_tokens=torch.tensor([[0, 1]]), bonus=torch.tensor([1]), width=2)
    out = emitted_logprobs(result, target, params=params, top_n=4)
    assert out.token.tolist() == [[0.0, 0.0]]  # the one kept token has probability 1
    assert out.top_logprobs[0, 0, 1:].tolist() == [float("-inf")] * 3


def test_tokens_beyond_a_param_error_emit_nothing():
    target = torch.randn(2, 3, 11)
    result = VerifyResult(num_accepted=torch.tensor([0, 0], dtype=torch.int32),
                          output_tokens=torch.tensor([[4, -1, -1], [-1, -1, -1]]),
                          bonus=torch.tensor([4, -1]), width=3)
    out = emitted_logprobs(result, target)
    assert torch.isnan(out.token[1]).all() and not math.isnan(float(out.token[0, 0]))
    assert float(out.token[0, 0]) == pytest.approx(float(torch.log_softmax(target[0, 0], -1)[4]))


def test_bad_inputs_are_sr916_all_at_once():
    target = torch.randn(2, 3, 11)
    result = VerifyResult(num_accepted=torch.tensor([0, 1], dtype=torch.int32),
                          output_tokens=torch.zeros(2, 3, dtype=torch.long),
                          bonus=torch.zeros(2, dtype=torch.long), width=3)
    with pytest.raises(KernelInputError) as info:
        emitted_logprobs(result, target.to(torch.float64).to("meta"), top_n=12)
    assert info.value.codes == ("SR916", "SR916")
    with pytest.raises(KernelInputError) as info:
        emitted_logprobs(result, torch.randn(5, 11))
    assert info.value.codes == ("SR916",)
    with pytest.raises(KernelInputError) as info:
        emitted_logprobs(object(), target)
    assert info.value.codes == ("SR916",)
    assert isinstance(info.value, ValueError)


@pytest.mark.parametrize("order", ["specreg", "vllm", "sglang"])
def test_torch_equals_the_reference_in_every_filter_order(order):
    from specreg.kernels.logprobs.reference import logprobs_reference
    from specreg.kernels.logprobs.torch_impl import logprobs_torch
    from specreg.kernels.logprobs.types import LogprobInputs

    gen = torch.Generator().manual_seed(11)
    m, vocab = 24, 50
    flat = torch.randn(40, vocab, generator=gen) * 2
    inputs = LogprobInputs(
        flat=flat, rows=torch.randint(0, 40, (m,), generator=gen),
        tokens=torch.randint(0, vocab, (m,), generator=gen),
        temperature=torch.rand(m, generator=gen) + 0.3,
        top_k=torch.tensor([0, 1, 5, 50] * 6), top_p=torch.tensor([1.0, 0.9, 0.5, 0.3] * 6),
        min_p=torch.tensor([0.0, 0.0, 0.2, 0.05, 0.0, 0.5] * 4), top_n=5,
        probabilities=False, filter_order=order,
    )
    token, ids, lps = logprobs_torch(inputs)
    want_token, want_top = logprobs_reference(inputs)
    for i in range(m):
        if want_token[i] == float("-inf"):
            assert float(token[i]) == float("-inf")
        else:
            assert float(token[i]) == pytest.approx(want_token[i], abs=2e-5)
        assert ids[i].tolist() == [v for v, _ in want_top[i]]
