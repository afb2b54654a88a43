"""Tree verification with penalties: every node is penalised counting the drafts on its path
(found here by walking the links by hand). Torch and Triton equal, token for token on the same
seeded keys, the plain reference rule verifying scores penalised beforehand by the
per-position reference."""

import pytest
import torch
from specreg.kernels.tree_verify_params import verify_tree_with_params
from specreg.kernels.tree_verify_params.reference import verify_tree_with_params_reference
from tests.support.eagle import links, make_tree

from specreg.testing.demo_params import mixed_demo_params
from specreg.kernels.penalties import Penalties, tree_context
from specreg.kernels.penalties.reference import penalised_row
from specreg.kernels.sampling import request_keys


def _paths(cand, next_token, next_sibling):
    """Per request, node -> the draft tokens on the path root -> node (root excluded)."""
    out = []
    for r in range(cand.shape[0]):
        path = {0: []}
        stack = [0]
        while stack:
            node = stack.pop()
            child = int(next_token[r, node])
            while child >= 0:
                path[child] = path[node] + [int(cand[r, child])]
                stack.append(child)
                child = int(next_sibling[r, child])
        out.append(path)
    return out


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_penalised_tree_equals_prepenalised_scores(backend):
    b, topk, steps, n, vocab = 8, 2, 3, 7, 64
    tree, gen = make_tree(b, topk, steps, n, vocab, 4)
    cand = tree.draft_tokens.view(b, n).clone()
    cand[:, 1:] = torch.randint(0, 5, (b, n - 1), generator=gen)
    target = 2 * torch.randn(b, n, vocab, generator=gen)
    target[:, :, :5] += 4.0
    _, ridx, nt, ns = links(tree, n)
    paths = _paths(cand, nt, ns)
    context = tree_context(cand, nt, ns, steps)
    for r in range(b):
        for node, path in paths[r].items():
            assert sorted(t for t in context[r, node].tolist() if t >= 0) == sorted(path)
    pen = Penalties.of(b, repetition=1.5, frequency=0.7, presence=0.4,
                       output=[[0, 1]] * b, prompt=[[2]] * b, logit_bias=[{4: 1.0}] * b)
    params = mixed_demo_params(b)
    got = verify_tree_with_params(cand, ridx, nt, ns, target.clone(), depth=steps, params=params,
                                  penalties=pen, backend=backend)
    pre = target.clone()
    for r in range(b):
        for node, path in paths[r].items():
            pre[r, node] = penalised_row(target[r, node], pen, r, path)
    keys = request_keys(params)  # every request seeded: its key is its seed
    positions = torch.zeros(b, dtype=torch.int64)
    want = verify_tree_with_params_reference(cand, ridx, nt, ns, pre, depth=steps, params=params,
                                             keys=keys, positions=positions)
    assert torch.equal(got.output_tokens, want.output_tokens)
    assert torch.equal(got.accept_index, want.accept_index)
    assert int(got.accept_token_num.max()) >= 1
