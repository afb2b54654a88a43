"""The two-level final draw (`specreg_eagle.kernels.residual_draw`) against its per-row
reference and against the flat inverse CDF: rows with zeros, tails shorter than a block, coins
at the edges, and blocks emptied by tried tokens."""

import torch
from specreg_eagle.kernels.residual_draw import DRAW_BLOCK, final_tokens
from specreg_eagle.kernels.residual_draw.reference import two_level_draw_reference
from specreg_eagle.kernels.verify_sampling.reference import _inverse_cdf as flat_inverse_cdf


def test_final_tokens_equal_the_reference_and_the_flat_inverse_cdf():
    gen = torch.Generator().manual_seed(5)
    for vocab in (DRAW_BLOCK * 3, DRAW_BLOCK * 2 + 37, 5):
        b, n = 12, 3
        p = torch.rand(b, n, vocab, generator=gen) ** 4
        p[:, :, : vocab // 2] *= (torch.rand(b, n, vocab // 2, generator=gen) < 0.3)
        p[0, :, DRAW_BLOCK:] = 0.0  # the mass in the first block only
        p = p / p.sum(-1, keepdim=True)
        last = torch.randint(0, n, (b,), generator=gen)
        coins = torch.rand(b, generator=gen)
        coins[:2] = torch.tensor([0.0, 1.0 - 2**-24])
        tried = torch.stack([torch.randperm(vocab, generator=gen)[:4] for _ in range(b)])
        tried[1, 0] = int(p[1, last[1]].argmax())  # the row's largest weight is tried
        live = torch.rand(b, 4, generator=gen) < 0.6
        got = final_tokens(p, None, last, None, None, tried, None, live, coins)
        for r in range(b):
            weights = p[r, last[r]].clone()
            weights[tried[r][live[r]]] = 0.0
            if not weights.sum() > 0:
                weights = p[r, last[r]]
            row = weights.double().tolist()
            want = two_level_draw_reference(row, float(coins[r]))
            assert int(got[r]) == want, (vocab, r)
            assert want == flat_inverse_cdf(row, float(coins[r])), (vocab, r)


def test_a_row_whose_mass_is_all_tried_falls_back_to_p():
    p = torch.zeros(1, 1, 300)
    p[0, 0, 250] = 1.0
    got = final_tokens(p, None, torch.zeros(1, dtype=torch.int64), None, None,
                       torch.tensor([[250]]), None, torch.tensor([[True]]), torch.tensor([0.5]))
    assert got.tolist() == [250]
