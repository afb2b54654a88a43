"""Fuzz the DSpark kernels (torch path): correct shapes/ranges or coded errors."""

from __future__ import annotations

import pytest
import torch
from hypothesis import given
from hypothesis import strategies as st
from specreg_dspark.kernels.draft_block import build_draft_block
from specreg_dspark.kernels.markov_greedy import markov_greedy_step
from specreg_dspark.kernels.markov_head import make_markov_head

from tests.support.fuzz import coded_or_result, fuzz_settings
from tests.support.kernel_inputs import all_meta, float_tensor, index_tensor

pytestmark = pytest.mark.fuzz

@fuzz_settings(300)
@given(data=st.data(), b=st.integers(0, 4),
       width=st.one_of(st.integers(-1, 6), st.sampled_from([True, 2.5])),
       mask=st.one_of(st.integers(-2, 10), st.sampled_from([2**40, None])),
       vocab=st.one_of(st.none(), st.integers(-1, 10)))  # fmt: skip
def test_build_draft_block(data, b, width, mask, vocab):
    anchor = data.draw(index_tensor((b,), 0, vocab or 8))
    positions = data.draw(index_tensor((b,), 0, 100))
    out, error = coded_or_result(
        lambda: build_draft_block(anchor, positions, width=width, mask_token_id=mask,
                                  vocab_size=vocab)  # fmt: skip
    )
    if error is None and not all_meta(anchor, positions):
        ids, pos = out
        assert ids.shape == pos.shape == (b, width)


@fuzz_settings(300)
@given(data=st.data(), b=st.integers(0, 4), v=st.integers(0, 6), r=st.integers(0, 3),
       block_v=st.sampled_from([128, 16, 15, 0, 2.0]))  # fmt: skip
def test_markov_greedy_step(data, b, v, r, block_v):
    logits = data.draw(float_tensor((b, v), probabilities=False))
    prev = data.draw(index_tensor((b,), 0, v))
    w1 = data.draw(float_tensor((v, r), probabilities=False))
    w2 = data.draw(float_tensor((v, r), probabilities=False))
    out, error = coded_or_result(
        lambda: markov_greedy_step(logits, prev, w1, w2, block_v=block_v)
    )
    if error is None and not all_meta(logits, prev, w1, w2):
        assert out.shape == (b,) and bool(((out >= 0) & (out < v)).all())
        expect = torch.argmax(logits.float() + (w1.float()[prev.long()] @ w2.float().T), -1)
        finite = torch.isfinite(logits.float()).all(-1) & torch.isfinite(w1).all() & torch.isfinite(w2).all()
        assert torch.equal(out[finite], expect[finite])


@fuzz_settings(150)
@given(data=st.data(), head=st.sampled_from(["vanilla", "gated", "rnn"]), b=st.integers(0, 3),
       gamma=st.integers(0, 3), v=st.integers(1, 6), use_hidden=st.booleans())  # fmt: skip
def test_markov_head_sample_block(data, head, b, gamma, v, use_hidden):
    torch.manual_seed(0)
    model = make_markov_head(head, vocab_size=v, rank=2, hidden_size=3)
    logits = data.draw(float_tensor((b, gamma, v), probabilities=False))
    anchor = data.draw(index_tensor((b,), 0, v))
    hidden = data.draw(float_tensor((b, gamma, 3), probabilities=False)) if use_hidden else None
    with torch.no_grad():
        out, error = coded_or_result(lambda: model.sample_block(logits, anchor, hidden))
        greedy, error2 = coded_or_result(lambda: model.greedy_block(logits, anchor, hidden))
    if error is None and not all_meta(logits, anchor, hidden):
        tokens, corrected = out
        assert tokens.shape == (b, gamma) and corrected.shape == (b, gamma, v)
        assert bool(((tokens >= 0) & (tokens < v)).all())
