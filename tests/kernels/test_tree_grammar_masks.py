"""Tree verification with a grammar bitmask per node: torch and Triton equal, token for token
and on the same seeded keys, the plain reference rule verifying scores masked beforehand by the
mask's per-row reference; so the tree rule's exactness and lossless tests carry over to masks."""

import pytest
import torch
from specreg.kernels.tree_verify_params import verify_tree_with_params
from specreg.kernels.tree_verify_params.reference import verify_tree_with_params_reference
from tests.support.eagle import links, make_tree

from specreg.testing.demo_params import mixed_demo_params
from specreg.kernels.sampling import request_keys
from specreg.kernels.token_mask import bitmask_words
from specreg.kernels.token_mask.reference import allowed_tokens, masked_row


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_masked_tree_equals_premasked_scores(backend):
    b, topk, steps, n, vocab = 8, 2, 3, 7, 64
    tree, gen = make_tree(b, topk, steps, n, vocab, 2)
    cand = tree.draft_tokens.view(b, n).clone()
    cand[:, 1:] = torch.randint(0, 6, (b, n - 1), generator=gen)
    target = 2 * torch.randn(b, n, vocab, generator=gen)
    target[:, :, :6] += 4.0
    draft = target + torch.randn(b, n, vocab, generator=gen)
    words = torch.randint(-2**31, 2**31 - 1, (b, n, bitmask_words(vocab)), generator=gen,
                          dtype=torch.int64).to(torch.int32)
    words[..., 0] |= 0b111  # some of the likely drafts allowed: paths go past the root
    params = mixed_demo_params(b)
    tree_links = (cand, *links(tree, n)[1:])
    got = verify_tree_with_params(*tree_links, target.clone(), depth=steps, draft=draft.clone(),
                                  params=params, token_bitmask=words, backend=backend)
    pre_t = torch.stack([torch.stack([masked_row(target[r, i], words[r, i], probabilities=False)
                                      for i in range(n)]) for r in range(b)])
    pre_d = torch.stack([torch.stack([masked_row(draft[r, i], words[r, i], probabilities=False)
                                      for i in range(n)]) for r in range(b)])
    keys = request_keys(params)  # every request seeded: its key is its seed
    positions = torch.zeros(b, dtype=torch.int64)
    want = verify_tree_with_params_reference(*tree_links, pre_t, depth=steps, params=params,
                                             keys=keys, positions=positions,
                                             draft=pre_d)
    assert torch.equal(got.output_tokens, want.output_tokens)
    assert torch.equal(got.accept_index, want.accept_index)
    assert int(got.accept_token_num.max()) >= 1
    flat_words = words.view(b * n, -1)
    for r in range(b):
        for j in range(int(got.accept_token_num[r]) + 1):
            row = int(got.accept_index[r, j])
            assert allowed_tokens(flat_words[row], vocab)[int(got.output_tokens[r, j])]
