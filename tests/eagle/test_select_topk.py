import pytest
import torch
from specreg_eagle.kernels.select_topk import organize_draft_results, select_top_k_tokens

from specreg.errors import KernelInputError


def test_select_top_k_tokens_global_ids():
    b, k = 2, 2
    topk_p = torch.tensor([[0.6, 0.3], [0.5, 0.4]])
    topk_index = torch.tensor([[5, 6], [7, 8]])
    ids, hidden, scores, info = select_top_k_tokens(0, topk_p, topk_index, torch.randn(b, 4), None, k)
    info0 = info
    assert ids.tolist() == [5, 6, 7, 8] and hidden.shape == (4, 4)
    assert info[2].tolist() == [[-1, 0, 1], [-1, 0, 1]]
    child_p = torch.tensor([[0.9, 0.1], [0.2, 0.8], [0.5, 0.5], [0.7, 0.3]])
    child_i = torch.tensor([[1, 2], [3, 4], [1, 2], [3, 4]])
    ids, hidden, scores, info = select_top_k_tokens(1, child_p, child_i, hidden, scores, k)
    # request 0: 0.6*0.9=.54 (pos 0), 0.3*0.8=.24 (pos 3) -> global ids 2 + pos
    assert info[2][0].tolist() == [2, 5] and ids[:2].tolist() == [1, 4]
    parent_list, sel, drafts = organize_draft_results(
        [info0[0], info[0]], [info0[1], info[1]], [info0[2], info[2]], 3
    )
    assert sel.shape == (2, 2) and bool((sel[:, :-1] <= sel[:, 1:]).all())


def test_organize_errors():
    with pytest.raises(KernelInputError) as info:
        organize_draft_results([], [], [], 4)
    assert info.value.code == "SR213"
