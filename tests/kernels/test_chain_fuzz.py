"""Fuzz the chain verify and sampling kernels (torch path): correct results or coded errors."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st

from specreg.chain_verifier import ChainVerifier
from specreg.kernels.chain import (
    verify_chain_greedy,
    verify_chain_sampling,
    verify_chain_target_only,
)
from specreg.kernels.sampling import exponential_race_sample, inverse_cdf_sample, uniform_coins
from tests.support.fuzz import coded_or_result, fuzz_settings
from tests.support.kernel_inputs import all_meta, float_tensor, index_tensor

pytestmark = pytest.mark.fuzz

dims = st.fixed_dictionaries({"b": st.integers(0, 4), "n": st.integers(0, 5), "v": st.integers(0, 7)})


def _greedy_reference(candidates, logits, verify_lens):
    """Python loop: accept while the draft equals the target's argmax at the previous position."""
    b, n = candidates.shape
    accept, bonus = [], []
    for r in range(b):
        limit = n if verify_lens is None else int(verify_lens[r])
        best = [int(torch.argmax(logits[r, i].double())) for i in range(limit)]
        a = 0
        while a + 1 < limit and int(candidates[r, a + 1]) == best[a]:
            a += 1
        accept.append(a)
        bonus.append(best[a])
    return accept, bonus


def _check_result(result, candidates, b, n, v):
    if result.accept_len.device.type == "meta":
        assert result.accept_len.shape == (b,)
        return
    assert result.accept_len.shape == (b,) and result.bonus.shape == (b,)
    assert result.output_tokens.shape == (b, n)
    acc = result.accept_len.long()
    assert bool(((acc >= 0) & (acc <= max(n - 1, 0))).all())
    assert bool(((result.bonus >= 0) & (result.bonus < v)).all())
    for r in range(b):
        a = int(acc[r])
        out = result.output_tokens[r]
        assert torch.equal(out[:a], candidates[r, 1 : a + 1].long())
        assert int(out[a]) == int(result.bonus[r])
        assert bool((out[a + 1 :] == -1).all())


@fuzz_settings(400)
@given(data=st.data(), d=dims, ragged=st.booleans())
def test_verify_chain_greedy(data, d, ragged):
    b, n, v = d["b"], d["n"], d["v"]
    candidates = data.draw(index_tensor((b, n), 0, v))
    logits = data.draw(float_tensor((b, n, v), probabilities=False))
    lens = data.draw(index_tensor((b,), 1, n + 1)) if ragged else None
    result, error = coded_or_result(
        lambda: verify_chain_greedy(candidates, logits, verify_lens=lens)
    )
    if error is not None or all_meta(candidates, logits, lens):
        return
    _check_result(result, candidates, b, n, v)
    accept, bonus = _greedy_reference(candidates, logits, lens)
    assert result.accept_len.tolist() == accept and result.bonus.tolist() == bonus


@fuzz_settings(400)
@given(
    data=st.data(), d=dims, ragged=st.booleans(), with_q=st.booleans(),
    coin_mode=st.sampled_from(["given", "keys", "generator"]),
)  # fmt: skip
def test_verify_chain_sampling(data, d, ragged, with_q, coin_mode):
    b, n, v = d["b"], d["n"], d["v"]
    candidates = data.draw(index_tensor((b, n), 0, v))
    p = data.draw(float_tensor((b, n, v), probabilities=True))
    q = data.draw(float_tensor((b, max(n - 1, 0), v), probabilities=True)) if with_q else None
    lens = data.draw(index_tensor((b,), 1, n + 1)) if ragged else None
    kwargs = {}
    if coin_mode == "given":
        kwargs["coins"] = data.draw(float_tensor((b, max(n - 1, 0)), probabilities=False)).abs() % 1
        kwargs["keys"] = data.draw(index_tensor((b,), -(2**62), 2**62))
    elif coin_mode == "keys":
        kwargs["keys"] = data.draw(index_tensor((b,), -(2**62), 2**62))
        if data.draw(st.booleans()):
            kwargs["positions"] = data.draw(index_tensor((b,), 0, 2**40))
    else:
        kwargs["generator"] = torch.Generator().manual_seed(data.draw(st.integers(0, 99)))
    fn = verify_chain_sampling if with_q or data.draw(st.booleans()) else None
    if fn is None:
        call = lambda: verify_chain_target_only(candidates, p, verify_lens=lens, **kwargs)  # noqa: E731
    else:
        call = lambda: fn(candidates, p, q, verify_lens=lens, **kwargs)  # noqa: E731
    result, error = coded_or_result(call)
    if error is None and not all_meta(candidates, p, q, lens):
        _check_result(result, candidates, b, n, v)
        if n == 1 or (lens is not None and b and bool((lens == 1).all())):
            assert bool((result.accept_len == 0).all())


@fuzz_settings(150)
@given(data=st.data(), d=dims, width=st.one_of(st.integers(-1, 6), st.sampled_from([True, 2.0, "3"])))
def test_chain_verifier(data, d, width):
    verifier, error = coded_or_result(lambda: ChainVerifier(width))
    if error is not None:
        return
    b, n, v = d["b"], d["n"], d["v"]
    candidates = data.draw(index_tensor((b, n), 0, v))
    logits = data.draw(float_tensor((b, n, v), probabilities=True))
    for call in (
        lambda: verifier.verify_greedy(candidates, logits),
        lambda: verifier.verify_target_only(candidates, logits,
                                            generator=torch.Generator().manual_seed(1)),
        lambda: verifier.verify_greedy_from_predict(candidates, candidates),
    ):
        result, error = coded_or_result(call)
        if error is None and not all_meta(candidates, logits):
            # strategies may draw shapes other than d's; a result covers the candidates' rows
            assert result.accept_len.shape == (candidates.shape[0],)


# ------------------------------------------------------------------------------- sampling
@fuzz_settings(300)
@given(data=st.data(), rows=st.integers(0, 4), v=st.integers(0, 7), with_noise=st.booleans())
def test_exponential_race_sample(data, rows, v, with_noise):
    probs = data.draw(float_tensor((rows, v), probabilities=True))
    noise = data.draw(float_tensor((rows, v), probabilities=False)) if with_noise else None
    out, error = coded_or_result(lambda: exponential_race_sample(probs, noise=noise))
    if error is None and not all_meta(probs, noise):
        # strategies may draw shapes other than (rows, v): check against what was drawn
        n_rows, vocab = probs.shape
        assert out.shape == (n_rows,) and out.dtype == torch.int64
        assert bool(((out >= 0) & (out < vocab)).all())
        # a zero-probability entry never wins
        chosen = probs.double().gather(1, out.view(-1, 1)) if n_rows else probs
        assert bool((chosen > 0).all())


@fuzz_settings(300)
@given(
    shape=st.lists(st.integers(0, 4), max_size=3),
    seed=st.one_of(st.none(), st.integers(-(2**64), 2**64)),
    data=st.data(),
)
def test_uniform_coins(shape, seed, data):
    offsets = None
    if seed is not None and shape and data.draw(st.booleans()):
        offsets = data.draw(index_tensor(shape[:-1], -(2**40), 2**40))
    out, error = coded_or_result(
        lambda: uniform_coins(shape, device="cpu", seed=seed, offsets=offsets)
    )
    if error is None:
        assert tuple(out.shape) == tuple(shape) and out.dtype == torch.float32
        assert bool(((out >= 0) & (out < 1)).all())


@fuzz_settings(300)
@given(data=st.data(), rows=st.integers(0, 4), v=st.integers(0, 7))
def test_inverse_cdf_sample(data, rows, v):
    weights = data.draw(float_tensor((rows, v), probabilities=True))
    coins = data.draw(float_tensor((rows,), probabilities=False)).abs() % 1
    out, error = coded_or_result(lambda: inverse_cdf_sample(weights, coins))
    if error is None and not all_meta(weights, coins):
        assert out.shape == (rows,)
        assert bool(((out >= 0) & (out < v)).all())
