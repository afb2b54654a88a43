"""Tree sampling emits exactly the target distribution (chi-square at a fixed seed).

Toy target: P[prev] is the next-token distribution after token `prev` (V = 5). The tree is a
complete depth-2 tree (root, K children, K*K grandchildren) in BFS order. Children of a node are
drawn WITHOUT replacement, in sibling order: from q[prev] for the recursive-rejection rule, from
an unrelated distribution for the target-only rule (any distinct candidates are allowed there).
"""

import pytest
import torch
from scipy.stats import chisquare
from specreg.kernels.tree_verify_sampling import verify_tree_sampling

from tests.support.eagle import full_tree_links

V = 5
SAMPLES = 30000


def draw_without_replacement(q_rows: torch.Tensor, k: int, gen: torch.Generator) -> torch.Tensor:
    """k distinct tokens per row in draw order (Gumbel top-k = sequential sampling)."""
    gumbel = -torch.log(-torch.log(torch.rand(q_rows.shape, generator=gen).clamp(1e-12, 1 - 1e-7)))
    keys = torch.where(q_rows > 0, q_rows.log() + gumbel, torch.full_like(q_rows, -1e30))
    return keys.topk(k, -1).indices


def run(P, Q, topk, *, use_q, wrong_q=None, threshold_acc=1.0, seed=0):
    gen = torch.Generator().manual_seed(seed)
    b = SAMPLES
    n, parents, ridx, nt, ns = full_tree_links(b, topk)
    root = torch.zeros(b, dtype=torch.int64)
    cand = torch.zeros(b, n, dtype=torch.int64)
    cand[:, 0] = root
    draw_from = Q if use_q else torch.softmax(torch.randn(V, V, generator=gen), -1)
    level1 = draw_without_replacement(draw_from[root], topk, gen)
    cand[:, 1: 1 + topk] = level1
    for i in range(topk):
        kids = draw_without_replacement(draw_from[level1[:, i]], topk, gen)
        cand[:, 1 + topk + i * topk: 1 + topk + (i + 1) * topk] = kids
    target = P[cand]  # [b, n, V]: row i = P[token of node i]
    q_used = wrong_q if wrong_q is not None else Q
    draft = q_used[cand] if use_q else None
    out = verify_tree_sampling(cand, ridx, nt, ns, target, depth=2, draft_probs=draft,
                               threshold_acc=threshold_acc, generator=gen)
    return out.output_tokens


def pvalue(observed_tokens: torch.Tensor, probs: torch.Tensor) -> float:
    counts = torch.bincount(observed_tokens, minlength=probs.numel()).double()
    expected = probs.double() * counts.sum()
    zero = expected == 0
    assert counts[zero].sum() == 0, "a zero-probability token was emitted"
    return float(chisquare(counts[~zero], expected[~zero] * counts[~zero].sum() / expected[~zero].sum()).pvalue)


def pair_pvalue(tokens: torch.Tensor, P: torch.Tensor) -> float:
    """Joint of the first two emitted tokens. Rows that emitted one token this step get their
    second token from the next step, whose first token is a plain draw from P[t1]."""
    gen = torch.Generator().manual_seed(7)
    first, second = tokens[:, 0], tokens[:, 1].clone()
    missing = second < 0
    second[missing] = torch.multinomial(P[first[missing]], 1, generator=gen).squeeze(1)
    tokens = torch.stack([first, second], 1)
    joint = (P[0].unsqueeze(1) * P).flatten()  # P(t1) P(t2 | t1)
    return pvalue(tokens[:, 0] * V + tokens[:, 1], joint)


def near_tie(gen):
    base = torch.full((V, V), 1.0 / V)
    return (base + 1e-3 * torch.rand(V, V, generator=gen)).div(1.0 + 0.0)


def _norm(x):
    return x / x.sum(-1, keepdim=True)


def pairs():
    gen = torch.Generator().manual_seed(123)
    P = _norm(torch.rand(V, V, generator=gen) + 0.05)
    eye = torch.eye(V)
    disjoint_p = _norm(torch.tensor([[1.0, 1, 0, 0, 0]]).repeat(V, 1) + 0.0)
    disjoint_q = _norm(torch.tensor([[0.0, 0, 1, 1, 1]]).repeat(V, 1))
    q_holes = _norm(P * torch.tensor([1.0, 0, 1, 0, 1]))
    return {
        "p_eq_q": (P, P.clone()),
        "random": (P, _norm(torch.rand(V, V, generator=gen) + 0.01)),
        "disjoint": (disjoint_p, disjoint_q),
        "q_zero_where_p_positive": (P, q_holes),
        "near_tie": (_norm(near_tie(gen)), _norm(near_tie(gen))),
        "one_hot_q_target_only": (P, eye),
    }


# Two children cannot be drawn without replacement from a one-hot q: that pair runs target-only
# here and through a chain (topk 1) in test_lossless_one_hot_q_chain.
CASES = [(name, use_q) for name in pairs() for use_q in (False, True)
         if not (use_q and name == "one_hot_q_target_only")]


@pytest.mark.parametrize("name, use_q", CASES)
def test_lossless_first_and_pair(name, use_q):
    P, Q = pairs()[name]
    tokens = run(P, Q, 2, use_q=use_q)
    assert pvalue(tokens[:, 0], P[0]) > 1e-3
    assert pair_pvalue(tokens, P) > 1e-3


def test_lossless_one_hot_q_chain():
    P, Q = pairs()["one_hot_q_target_only"]
    tokens = run(P, Q, 1, use_q=True)
    assert pvalue(tokens[:, 0], P[0]) > 1e-3
    assert pair_pvalue(tokens, P) > 1e-3


def test_negative_control_biased_threshold_detected():
    P, Q = pairs()["random"]
    tokens = run(P, Q, 2, use_q=False, threshold_acc=0.5)
    assert pvalue(tokens[:, 0], P[0]) < 1e-6


def test_q_for_acceptance_must_be_q_sampled_from():
    """Drafts sampled from Q but verified with another q: the test sees the bias."""
    P, Q = pairs()["random"]
    wrong = _norm(Q.roll(1, dims=1) ** 3)
    tokens = run(P, Q, 2, use_q=True, wrong_q=wrong)
    assert min(pvalue(tokens[:, 0], P[0]), pair_pvalue(tokens, P)) < 1e-6
    tokens = run(P, Q, 2, use_q=True)  # the right q: lossless
    assert pvalue(tokens[:, 0], P[0]) > 1e-3
