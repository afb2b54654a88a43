"""Emitted-token log-probabilities on tree results: each emitted token's row is the accepted
path's node it was drawn at; torch and Triton (interpreter) equal plain decoding there."""

import pytest
import torch
from specreg.kernels.tree_verify_params import verify_tree_with_params
from tests.support.eagle import links, make_tree

from specreg.testing.demo_params import mixed_demo_params
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.logprobs import emitted_logprobs


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_tree_logprobs_equal_plain_decoding_along_the_accepted_path(backend):
    b, topk, steps, n, vocab = 10, 2, 3, 7, 64
    tree, gen = make_tree(b, topk, steps, n, vocab, 5)
    target = 2 * torch.randn(b, n, vocab, generator=gen)
    cand = tree.draft_tokens.view(b, n).clone()
    cand[:, 1:] = torch.randint(0, 4, (b, n - 1), generator=gen)
    target[:, :, :4] += 7.0  # the drafts (ids 0-3) likely: paths go deep
    params = mixed_demo_params(b)
    result = verify_tree_with_params(cand, *links(tree, n)[1:], target, depth=steps, params=params)
    out = emitted_logprobs(result, target, params=params, top_n=3, backend=backend)
    flat = target.reshape(b * n, vocab)
    deep = 0
    for r in range(b):
        emitted = int(result.accept_token_num[r]) + 1
        deep += emitted > 1
        for j in range(emitted):
            row = flat[int(result.accept_index[r, j])]
            t = float(params.temperature[r])
            if t == 0:
                plain = torch.log_softmax(row.double(), -1)
            else:
                plain = torch.log(filtered_distribution(
                    row, temperature=t, top_k=int(params.top_k[r]), top_p=float(params.top_p[r]),
                    min_p=float(params.min_p[r])))
            token = int(result.output_tokens[r, j])
            assert float(out.token[r, j]) == pytest.approx(float(plain[token]), abs=2e-5)
            best = sorted(range(vocab), key=lambda v: (-float(plain[v]), -float(row[v])))[:3]
            assert out.top_tokens[r, j].tolist() == best  # dropped ones (-inf) by score
        assert torch.isnan(out.token[r, emitted:]).all()
    assert deep >= 3  # the paths go past the root, so node rows (not only the root) are read
