"""The final draw of tree sampling (`specreg.kernels.tree_residual_draw`): the two-level race
on the random stream, against the per-row reference (`block_race_reference` over weights
computed here by hand from p, q and the tried tokens): rows with zeros, tails shorter than a
race block, blocks emptied by tried tokens, recursive-rejection residuals with frozen
coefficients, and rows without mass (the fallback to p, under the same key)."""

import torch
from specreg.kernels.tree_residual_draw import RACE_BLOCK, final_tokens
from specreg.kernels.tree_residual_draw.reference import final_token_reference

from specreg.kernels.random_stream import draw_lanes_torch, fresh_keys
from specreg.kernels.random_stream.reference import draw_lanes
from specreg.kernels.sampling.reference import block_race_reference


def _lanes(b, gen):
    """Random keys, roles (SAMPLE / RESIDUAL) and positions: the lanes as tensors and as the
    reference's (key, role, position) triples."""
    keys = fresh_keys(b, "cpu", generator=gen)
    roles = torch.randint(0, 2, (b,), generator=gen)
    positions = torch.randint(0, 1 << 40, (b,), generator=gen)
    triples = [(int(k), int(r), int(p)) for k, r, p in zip(keys, roles, positions, strict=True)]
    return draw_lanes_torch(keys, roles, positions), triples


def test_target_only_final_tokens_equal_the_reference():
    gen = torch.Generator().manual_seed(5)
    for vocab in (RACE_BLOCK * 3, RACE_BLOCK * 2 + 37, 5):
        b, n = 12, 3
        p = torch.rand(b, n, vocab, generator=gen) ** 4
        p[:, :, : vocab // 2] *= (torch.rand(b, n, vocab // 2, generator=gen) < 0.3)
        p[0, :, RACE_BLOCK:] = 0.0  # the mass in the first block only
        p = p / p.sum(-1, keepdim=True)
        last = torch.randint(0, n, (b,), generator=gen)
        tried = torch.stack([torch.randperm(vocab, generator=gen)[:4] for _ in range(b)])
        tried[1, 0] = int(p[1, last[1]].argmax())  # the row's largest weight is tried
        live = torch.rand(b, 4, generator=gen) < 0.6
        live[1, 0] = True
        lanes, triples = _lanes(b, gen)
        got = final_tokens(p, None, last, None, None, tried, None, live, lanes)
        for r in range(b):
            p_row = p[r, last[r]].tolist()
            struck = set(tried[r][live[r]].tolist())
            weights = [0.0 if t in struck else w for t, w in enumerate(p_row)]
            want = final_token_reference(weights, p_row, draw_lanes(*triples[r]))
            assert int(got[r]) == want, (vocab, r)
            assert weights[want] > 0 or not any(weights), (vocab, r)


def test_recursive_rejection_residuals_with_frozen_coefficients_equal_the_reference():
    """Rows max(p - a q, 0): the moving coefficient a for untried tokens, each tried token's
    own frozen one; a target-only row (`rrs` False) among them strikes its tried tokens."""
    gen = torch.Generator().manual_seed(8)
    b, n, vocab = 10, 2, RACE_BLOCK * 2 + 9
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen) * 3, -1)
    q = torch.softmax(torch.randn(b, n, vocab, generator=gen) * 3, -1)
    last = torch.randint(0, n, (b,), generator=gen)
    rrs = torch.ones(b, dtype=torch.bool)
    rrs[3] = False
    coef = 1.0 + torch.rand(b, generator=gen)
    tried = torch.stack([torch.randperm(vocab, generator=gen)[:3] for _ in range(b)])
    tried_val = coef[:, None] * torch.rand(b, 3, generator=gen)
    live = torch.rand(b, 3, generator=gen) < 0.7
    lanes, triples = _lanes(b, gen)
    got = final_tokens(p, q, last, rrs, coef, tried, tried_val, live, lanes)
    for r in range(b):
        p_row, q_row = p[r, last[r]], q[r, last[r]]
        a = torch.full((vocab,), float(coef[r]))
        struck = torch.zeros(vocab, dtype=torch.bool)
        for slot in range(3):
            if live[r, slot]:
                a[tried[r, slot]] = tried_val[r, slot]
                struck[tried[r, slot]] = True
        if rrs[r]:
            weights = (p_row - a * q_row).clamp_min(0)
        else:
            weights = torch.where(struck, 0.0, p_row)
        want = final_token_reference(weights.tolist(), p_row.tolist(), draw_lanes(*triples[r]))
        assert int(got[r]) == want, r


def test_a_row_whose_mass_is_all_tried_races_on_p_under_the_same_key():
    p = torch.zeros(2, 1, 300)
    p[0, 0, 250] = 1.0
    p[1, 0, [7, 130, 260]] = torch.tensor([0.5, 0.3, 0.2])
    tried = torch.tensor([[250, 0, 0], [7, 130, 260]])
    live = torch.tensor([[True, False, False], [True, True, True]])
    keys, positions = torch.tensor([3, 4]), torch.tensor([10, 20])
    lanes = draw_lanes_torch(keys, 1, positions)
    got = final_tokens(p, None, torch.zeros(2, dtype=torch.int64), None, None, tried, None,
                       live, lanes)
    assert int(got[0]) == 250
    want = block_race_reference(p[1, 0].tolist(), draw_lanes(4, 1, 20))
    assert int(got[1]) == want and want in (7, 130, 260)
