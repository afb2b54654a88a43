import pytest
import torch
from specreg.kernels.tree_build import build_tree
from specreg.kernels.tree_build.torch_impl import build_tree_torch
from specreg.kernels.tree_build.triton_impl import build_tree_triton
from specreg.kernels.tree_build.types import TreeBuildInputs, bitpacked_dtype

from specreg.errors import KernelInputError
from tests.support.eagle import naive_build_tree, random_draft

FIELDS = ("tree_mask", "positions", "retrieve_index", "retrieve_next_token",
          "retrieve_next_sibling", "draft_tokens", "invalid")


def worked_example():
    """topk=2, steps=3, one request. Level 0: ids 0,1; level 1: ids 2..5 (children of the two
    expanded level-0 nodes); level 2: ids 6..9."""
    parent_list = torch.tensor([[-1, 0, 1, 2, 4]])  # root, ids 0 1 (level 0), ids 2 4 (level 1)
    sel = torch.tensor([[0, 1, 2, 4, 6]])  # keep ids 0, 1, 2, 4, 6
    drafts = torch.tensor([[10, 11, 12, 13, 14]])
    return parent_list, sel, drafts


def test_worked_example():
    parent_list, sel, drafts = worked_example()
    out = build_tree(torch.tensor([7]), parent_list, sel, drafts, torch.tensor([3]),
                     topk=2, depth=3, num_verify_tokens=6, mask_mode="qlen_only")
    # id 2 = slot 1 -> child of id 0 (node 1); id 4 = slot 2 -> child of id 1 (node 2);
    # id 6 = slot 3 -> parent_list[3] = id 2 (node 3).
    assert out.retrieve_next_token.tolist() == [[1, 3, 4, 5, -1, -1]]
    assert out.retrieve_next_sibling.tolist() == [[-1, 2, -1, -1, -1, -1]]
    assert out.positions.tolist() == [3, 4, 4, 5, 5, 6]
    assert out.draft_tokens.tolist() == [7, 10, 11, 12, 13, 14]
    mask = out.tree_mask.view(6, 6).int().tolist()
    assert mask[5] == [1, 1, 0, 1, 0, 1]
    assert mask[4] == [1, 0, 1, 0, 1, 0]


def test_int32_inputs_build_the_same_tree():
    """SGLang passes int32 seq_lens: the range check against 2**62 must not wrap (it read 0 and
    refused every positive prefix length, found by the tree fuzz target's validity predicate)."""
    parent_list, sel, drafts = worked_example()
    args = dict(topk=2, depth=3, num_verify_tokens=6, mask_mode="qlen_only")
    wide = build_tree(torch.tensor([7]), parent_list, sel, drafts, torch.tensor([3]), **args)
    narrow = build_tree(torch.tensor([7], dtype=torch.int32), parent_list.int(), sel.int(),
                        drafts.int(), torch.tensor([3], dtype=torch.int32), **args)
    assert narrow.positions.tolist() == wide.positions.tolist() == [3, 4, 4, 5, 5, 6]
    assert narrow.retrieve_next_token.tolist() == wide.retrieve_next_token.tolist()


@pytest.mark.parametrize("seed", range(6))
def test_build_tree_matches_naive(seed):
    gen = torch.Generator().manual_seed(seed)
    for _ in range(6):
        topk = int(torch.randint(1, 9, (1,), generator=gen))
        steps = int(torch.randint(1, 7, (1,), generator=gen))
        b = int(torch.randint(1, 33, (1,), generator=gen))
        nodes = 1 + topk + (steps - 1) * topk * topk
        n = int(torch.randint(2, min(nodes, 40) + 1, (1,), generator=gen))
        parent_list, sel, drafts = random_draft(b, topk, steps, n, 64, gen)
        bonus = torch.randint(0, 64, (b,), generator=gen)
        seq = torch.randint(0, 9, (b,), generator=gen)
        ref = naive_build_tree(bonus, parent_list, sel, drafts, seq, topk, n)
        outs = {m: build_tree(bonus, parent_list, sel, drafts, seq, topk=topk, depth=steps,
                              num_verify_tokens=n, mask_mode=m)
                for m in ("full", "qlen_only", "qlen_only_bitpacking") if m[-4:] != "king" or n <= 32}
        q = outs["qlen_only"]
        assert q.tree_mask.view(b, n, n).tolist() == [r["mask"] for r in ref]
        assert q.positions.view(b, n).tolist() == [r["positions"] for r in ref]
        assert q.retrieve_next_token.tolist() == [r["first"] for r in ref]
        assert q.retrieve_next_sibling.tolist() == [r["sibling"] for r in ref]
        assert q.draft_tokens.view(b, n).tolist() == [r["tokens"] for r in ref]
        assert_modes_agree(outs, seq, b, n)


def assert_modes_agree(outs, seq, b, n):
    anc = outs["qlen_only"].tree_mask.view(b, n, n)
    if "qlen_only_bitpacking" not in outs:
        return check_full(outs, anc, seq, b, n)
    words = outs["qlen_only_bitpacking"].tree_mask.to(torch.int64) & ((1 << 32) - 1)
    assert outs["qlen_only_bitpacking"].tree_mask.dtype == bitpacked_dtype(n)
    unpacked = ((words.view(b, n, 1) >> torch.arange(n)) & 1).bool()
    assert torch.equal(unpacked, anc)
    check_full(outs, anc, seq, b, n)


def check_full(outs, anc, seq, b, n):
    full = outs["full"].tree_mask
    offset = 0
    for r in range(b):
        s = int(seq[r])
        block = full[offset: offset + n * (s + n)].view(n, s + n)
        assert bool(block[:, :s].all())
        assert torch.equal(block[:, s:], anc[r])
        offset += n * (s + n)
    assert offset == full.numel()


@pytest.mark.parametrize("mode", ["full", "qlen_only", "qlen_only_bitpacking"])
@pytest.mark.parametrize("shape", [(3, 2, 3, 6), (2, 3, 2, 10), (2, 1, 4, 5), (1, 4, 4, 20)])
def test_triton_matches_torch(mode, shape):
    b, topk, steps, n = shape
    gen = torch.Generator().manual_seed(hash(shape) % 1000)
    parent_list, sel, drafts = random_draft(b, topk, steps, n, 32, gen)
    bonus = torch.randint(0, 32, (b,), generator=gen)
    seq = torch.randint(0, 5, (b,), generator=gen)
    kw = dict(topk=topk, depth=steps, num_verify_tokens=n, mask_mode=mode)
    inputs = TreeBuildInputs(bonus, parent_list, sel, drafts, seq, **kw)
    ref = build_tree_torch(inputs)
    got = build_tree_triton(inputs)
    for field in FIELDS:
        a, c = getattr(ref, field), getattr(got, field)
        assert a.dtype == c.dtype and torch.equal(a, c), field


def _broken_inputs():
    parent_list, sel, drafts = worked_example()
    sel = torch.tensor([[0, 1, 3, 4, 6]])  # id 6 needs id 2 (dropped)
    return torch.tensor([7]), parent_list, sel, drafts, torch.tensor([3])


def test_missing_parent_raises_before_writing():
    with pytest.raises(KernelInputError) as info:
        build_tree(*_broken_inputs(), topk=2, depth=3, num_verify_tokens=6)
    assert info.value.code == "SR210"


def test_missing_parent_sets_flag_on_unchecked_triton_path():
    out = build_tree_triton(TreeBuildInputs(*_broken_inputs(), topk=2, depth=3,
                                            num_verify_tokens=6, mask_mode="qlen_only"))
    assert out.invalid.tolist() == [1]
    # the other request of a batch stays valid and nothing is written outside the row
    bonus, parent_list, sel, drafts, seq = _broken_inputs()
    good_pl, good_sel, good_drafts = worked_example()
    out = build_tree_triton(TreeBuildInputs(
        torch.tensor([7, 7]), torch.cat([parent_list, good_pl]), torch.cat([sel, good_sel]),
        torch.cat([drafts, good_drafts]), torch.tensor([3, 3]), topk=2, depth=3,
        num_verify_tokens=6, mask_mode="qlen_only"))
    assert out.invalid.tolist() == [1, 0]
    ref = build_tree(torch.tensor([7]), good_pl, good_sel, good_drafts, torch.tensor([3]),
                     topk=2, depth=3, num_verify_tokens=6, mask_mode="qlen_only")
    assert torch.equal(out.tree_mask[36:], ref.tree_mask)


def test_depth_too_small_is_invalid():
    parent_list, sel, drafts = worked_example()
    with pytest.raises(KernelInputError) as info:
        build_tree(torch.tensor([7]), parent_list[:, :3], sel, drafts, torch.tensor([3]),
                   topk=2, depth=2, num_verify_tokens=6)
    assert info.value.code in ("SR210", "SR903")


@pytest.mark.parametrize(
    "change, code",
    [
        (dict(mask_mode="bits"), "SR211"),
        (dict(num_verify_tokens=40, mask_mode="qlen_only_bitpacking"), "SR212"),
        (dict(sel=torch.tensor([[0, 1, 2, 4]])), "SR900"),
        (dict(sel=torch.tensor([[0.0, 1, 2, 4, 6]])), "SR901"),
        (dict(seq=torch.tensor([3], device="meta")), "SR902"),
        (dict(sel=torch.tensor([[0, 1, 2, 4, 99]])), "SR903"),
        (dict(topk=0), "SR904"),
    ],
)
def test_input_errors(change, code):
    parent_list, sel, drafts = worked_example()
    args = dict(sel=sel, seq=torch.tensor([3]), topk=2, num_verify_tokens=6, mask_mode="full")
    args.update(change)
    with pytest.raises(KernelInputError) as info:
        build_tree(torch.tensor([7]), parent_list, args["sel"], drafts, args["seq"],
                   topk=args["topk"], depth=3, num_verify_tokens=args["num_verify_tokens"],
                   mask_mode=args["mask_mode"])
    assert info.value.code == code
