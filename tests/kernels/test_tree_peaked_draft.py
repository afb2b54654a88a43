"""Tree sampling with children drawn without replacement from a peaked draft q.

When the first children hold nearly all of q, q's mass left for the later siblings is tiny;
taken as the running mass minus each tried q(x), float32 cancellation made it noise and the late
siblings were over-accepted. The untried mass is summed over the untried tokens instead: the
torch and Triton walks equal the float64 reference, and the emitted tokens follow p.
"""

import pytest
import torch
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg.kernels.tree_verify_sampling.reference import verify_tree_sampling_reference
from specreg.kernels.tree_coins import stream_tree_coins
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs

from specreg.step.draft_sampling import sample_children
from specreg.kernels.random_stream import fresh_keys
from specreg.contract.sampling_params import SamplingParams
from specreg.testing.lossless import P_VALUE_THRESHOLD, chi_square_p_value

V, K = 32, 4


def _peaked_tree(b: int, seed: int = 0):
    """b copies of one root with K children drawn from a peaked q, p far from q."""
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(V, generator=g) * 1.5, -1)
    q_logits = torch.randn(V, generator=g)
    q_logits[3] += 30.0  # q(3) ~ 1 - 3e-4, q(7) ~ 3e-4: the later children come from a tail
    q_logits[7] += 22.0  # of ~1e-11, far below float32's resolution of the running mass
    params = SamplingParams.of(b, temperature=1.0)
    drawn = sample_children(q_logits.expand(b, V).contiguous(), params, K,
                            generator=torch.Generator().manual_seed(seed + 1))
    n = K + 1
    candidates = torch.cat([torch.zeros(b, 1, dtype=torch.long), drawn.tokens], 1)
    next_token = torch.full((b, n), -1)
    next_token[:, 0] = 1
    next_sibling = torch.full((b, n), -1)
    next_sibling[:, 1:K] = torch.arange(2, K + 1)
    target = p.expand(b, n, V).contiguous()
    draft = torch.zeros(b, n, V)
    draft[:, 0] = drawn.q
    stream = dict(keys=fresh_keys(b, "cpu", generator=g),
                  positions=torch.randint(0, 1 << 20, (b,), generator=g))
    links = (candidates, torch.arange(b * n).view(b, n), next_token, next_sibling)
    return links, target, draft, stream, p


def _first_tokens(result, candidates):
    accepted = result.accept_token_num > 0
    child = (result.accept_index[:, 1] % candidates.shape[1]).clamp_min(0)
    return torch.where(accepted, candidates.gather(1, child[:, None]).squeeze(1), result.bonus)


def test_emitted_tokens_follow_p_with_a_peaked_draft():
    links, target, draft, stream, p = _peaked_tree(20000)
    result = verify_tree_sampling(*links, target, depth=1, draft_probs=draft, **stream)
    first = _first_tokens(result, links[0])
    assert float((result.accept_token_num > 0).float().mean()) > 0.05  # children accepted
    assert chi_square_p_value(torch.bincount(first, minlength=V), p) > P_VALUE_THRESHOLD


@pytest.mark.parametrize("backend", ["torch", "triton"])
def test_torch_and_triton_equal_the_reference_with_a_peaked_draft(backend):
    links, target, draft, stream, _ = _peaked_tree(48, seed=3)
    got = verify_tree_sampling(*links, target, depth=1, draft_probs=draft, **stream,
                               backend=backend)
    coins = stream_tree_coins(links[0], links[2], links[3], stream["keys"], stream["positions"])
    want = verify_tree_sampling_reference(TreeSamplingInputs(
        *links, target, draft, *coins, stream["keys"], stream["positions"], depth=1))
    assert torch.equal(got.accept_index, want.accept_index)
    assert torch.equal(got.bonus, want.bonus)
