"""Kernels read inputs that require grad as values: a model's output outside `torch.no_grad()`
verifies and samples exactly as the same values without autograd (the CPU paths gather rows
into reused buffers, which `out=` refuses to fill from autograd inputs)."""

import pytest
import torch

from specreg.kernels.chain import sample_tokens


@pytest.mark.parametrize("check_values", [None, False])
def test_rows_that_require_grad_draw_the_same_tokens(check_values):
    """A model's output outside torch.no_grad() requires grad: the draw reads its values (the
    chunked CPU path writes rows into a reused buffer, which autograd inputs cannot fill)."""
    g = torch.Generator().manual_seed(5)
    probs = torch.softmax(torch.randn(6, 300, generator=g), -1)
    keys, positions = torch.arange(6) + 11, torch.arange(6) * 3
    plain = sample_tokens(probs, keys=keys, positions=positions, check_values=check_values)
    weights = probs.clone().requires_grad_(True)
    tracked = sample_tokens(weights * 1.0, keys=keys, positions=positions,
                            check_values=check_values)
    assert torch.equal(plain, tracked)


def test_greedy_rows_that_require_grad_verify_alike():
    """Greedy chain and tree verification read logits that require grad as values (their CPU
    paths gather the rows a request reaches into a reused buffer)."""
    from specreg.kernels.tree_verify_greedy import verify_tree_greedy

    from specreg.kernels.chain import verify_chain_greedy
    from tests.support.eagle import tree_links

    g = torch.Generator().manual_seed(2)
    b, n, vocab = 8, 4, 50
    logits = torch.randn(b, n, vocab, generator=g)
    candidates = torch.randint(0, vocab, (b, n), generator=g)
    candidates[0, 1:] = logits[0].argmax(-1)[:-1]  # one request accepts everything
    tracked = logits.clone().requires_grad_(True) * 1.0
    plain = verify_chain_greedy(candidates, logits)
    assert torch.equal(verify_chain_greedy(candidates, tracked).output_tokens, plain.output_tokens)
    index, next_token, next_sibling = tree_links(b, (-1, 0, 1, 2))
    tree = verify_tree_greedy(candidates, index, next_token, next_sibling, depth=n - 1,
                              target_logits=logits)
    again = verify_tree_greedy(candidates, index, next_token, next_sibling, depth=n - 1,
                               target_logits=tracked)
    assert torch.equal(tree.output_tokens, again.output_tokens)
