"""Tree sampling on the Triton kernel (interpreter) emits exactly the target distribution.

The interpreter runs one request per program at tens of milliseconds each, so the trees are
small: root 0 with children 1 and 2 (depth 1), V = 4, drafted without replacement from q. The
first emitted token must be distributed as p; with the q used for acceptance differing from the
q the children were drawn from, the chi-square must reject (negative control). Every request
has its own fresh 64-bit key (and a random position), so its acceptance coins and its final
race are independent stream values; every run also equals the torch implementation token for
token on the same keys.
"""

import pytest
import torch
from scipy.stats import chisquare
from specreg.kernels.tree_verify_sampling import verify_tree_sampling

from specreg.kernels.random_stream import fresh_keys

V = 4
SAMPLES = 120
P = torch.tensor([0.5, 0.3, 0.15, 0.05])
Q_REVERSED = torch.tensor([0.05, 0.15, 0.3, 0.5])  # q puts its mass where p has least


def first_tokens(drawn_from, verified_with, *, use_q, seed):
    """First emitted tokens of SAMPLES requests on Triton, checked equal to torch's."""
    gen = torch.Generator().manual_seed(seed)
    gumbel = -torch.log(-torch.log(torch.rand(SAMPLES, V, generator=gen)))
    keys = torch.where(drawn_from > 0, drawn_from.log() + gumbel, torch.full_like(gumbel, -1e30))
    candidates = torch.zeros(SAMPLES, 3, dtype=torch.int64)
    candidates[:, 1:] = keys.topk(2, -1).indices  # sequential draws without replacement
    links = (
        torch.arange(SAMPLES * 3).view(SAMPLES, 3),
        torch.tensor([1, -1, -1]).repeat(SAMPLES, 1),
        torch.tensor([-1, 2, -1]).repeat(SAMPLES, 1),
    )
    target = P.expand(SAMPLES, 3, V).contiguous()
    draft = verified_with.expand(SAMPLES, 3, V).contiguous() if use_q else None
    keys = fresh_keys(SAMPLES, "cpu", generator=gen)
    positions = torch.randint(0, 1 << 30, (SAMPLES,), generator=gen)
    outs = [
        verify_tree_sampling(candidates, *links, target, depth=1, draft_probs=draft,
                             keys=keys, positions=positions, backend=backend)
        for backend in ("triton", "torch")
    ]  # fmt: skip
    assert torch.equal(outs[0].output_tokens, outs[1].output_tokens)
    return outs[0].output_tokens[:, 0]


def pvalue(tokens):
    counts = torch.bincount(tokens, minlength=V).double()
    expected = P.double() / P.double().sum() * counts.sum()
    return float(chisquare(counts, expected * (counts.sum() / expected.sum())).pvalue)


@pytest.mark.parametrize("use_q", [False, True])
def test_triton_tree_sampling_is_lossless(use_q):
    assert pvalue(first_tokens(Q_REVERSED, Q_REVERSED, use_q=use_q, seed=1)) > 1e-3


def test_triton_negative_control_wrong_q_is_detected():
    wrong = Q_REVERSED.roll(1) ** 3
    wrong = wrong / wrong.sum()
    assert pvalue(first_tokens(Q_REVERSED, wrong, use_q=True, seed=2)) < 1e-6
