"""Every core tree kernel family against its plain `reference.py`: the torch implementation and
the Triton one (interpreter) on the same inputs, exactly (sampling given the same keys,
positions and coins: the stream's, or a caller's in SGLang's layout)."""

import functools

import pytest
import torch
from specreg.kernels.tree_build import build_tree
from specreg.kernels.tree_build.reference import build_tree_reference
from specreg.kernels.tree_build.torch_impl import build_tree_torch
from specreg.kernels.tree_build.triton_impl import build_tree_triton
from specreg.kernels.tree_build.types import TreeBuildInputs
from specreg.kernels.tree_verify_greedy import verify_tree_greedy
from specreg.kernels.tree_verify_greedy.reference import (
    verify_tree_greedy_from_logits_reference,
    verify_tree_greedy_reference,
)
from specreg.kernels.tree_verify_greedy.torch_impl import (
    verify_tree_greedy_from_logits_torch,
    verify_tree_greedy_torch,
)
from specreg.kernels.tree_verify_greedy.triton_impl import verify_tree_greedy_triton
from specreg.kernels.tree_verify_sampling import torch_impl as sampling_torch_impl
from specreg.kernels.tree_verify_params import verify_tree_with_params
from specreg.kernels.tree_coins import caller_tree_coins, stream_tree_coins
from specreg.kernels.tree_coins.reference import stream_coins_reference
from specreg.kernels.tree_verify_params.reference import verify_tree_with_params_reference
from specreg.kernels.tree_verify_sampling.reference import verify_tree_sampling_reference
from specreg.kernels.tree_verify_sampling.torch_impl import verify_tree_sampling_torch
from specreg.kernels.tree_verify_sampling.triton_impl import verify_tree_sampling_triton
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs

from specreg.errors import KernelInputError
from specreg.kernels.argmax import FOLD_WIDTH
from specreg.kernels.random_stream import fresh_keys
from specreg.kernels.row_chunks import cpu_row_chunks
from specreg.kernels.sampling import request_keys
from specreg.contract.sampling_params import SamplingParams
from tests.support.eagle import random_draft


TREE_FIELDS = ("tree_mask", "positions", "retrieve_index", "retrieve_next_token",
               "retrieve_next_sibling", "draft_tokens", "invalid")


VERIFY_FIELDS = ("predicts", "accept_index", "accept_token_num", "bonus", "output_tokens")


MODES = ("full", "qlen_only", "qlen_only_bitpacking")


def assert_same(expected, got, fields):
    for field in fields:
        a, b = getattr(expected, field), getattr(got, field)
        assert a.dtype == b.dtype and a.shape == b.shape, field
        assert torch.equal(a, b), field


# ------------------------------------------------------------------------------------ tree_build


def tree_inputs(b, topk, steps, n, seed, mode, **extra):
    gen = torch.Generator().manual_seed(seed)
    parent_list, sel, drafts = random_draft(b, topk, steps, n, 32, gen)
    bonus = torch.randint(0, 32, (b,), generator=gen)
    seq = torch.randint(0, 6, (b,), generator=gen)
    return TreeBuildInputs(bonus, parent_list, sel, drafts, seq, topk=topk, depth=steps,
                           num_verify_tokens=n, mask_mode=mode, **extra)


@pytest.mark.parametrize("mode", MODES)
@pytest.mark.parametrize("shape", [(3, 2, 3, 6), (2, 3, 2, 10), (2, 1, 4, 5), (1, 4, 4, 20),
                                   (2, 3, 3, 17), (1, 2, 1, 3)])
def test_build_tree_torch_and_triton_match_reference(mode, shape):
    inputs = tree_inputs(*shape, seed=sum(shape), mode=mode)
    ref = build_tree_reference(inputs)
    assert_same(ref, build_tree_torch(inputs), TREE_FIELDS)
    assert_same(ref, build_tree_triton(inputs), TREE_FIELDS)


@pytest.mark.parametrize("extra", [dict(fill_prefix_mask=False), dict(seq_lens_sum=40)])
def test_build_tree_full_mask_options_match_reference(extra):
    inputs = tree_inputs(3, 2, 3, 7, seed=5, mode="full", **extra)
    ref = build_tree_reference(inputs)
    assert_same(ref, build_tree_torch(inputs), TREE_FIELDS)
    assert_same(ref, build_tree_triton(inputs), TREE_FIELDS)


@pytest.mark.parametrize("mode", MODES)
def test_invalid_tree_flagged_like_reference(mode):
    # topk=2, steps=3: id 6 (slot 3) needs id 2, which request 0 dropped; request 1 is valid.
    parent_list = torch.tensor([[-1, 0, 1, 2, 4]]).repeat(2, 1)
    sel = torch.tensor([[0, 1, 3, 4, 6], [0, 1, 2, 4, 6]])
    inputs = TreeBuildInputs(torch.tensor([7, 8]), parent_list, sel,
                             torch.tensor([[10, 11, 12, 13, 14]]).repeat(2, 1),
                             torch.tensor([3, 2]), topk=2, depth=3, num_verify_tokens=6,
                             mask_mode=mode)
    ref = build_tree_reference(inputs)
    assert ref.invalid.tolist() == [1, 0]
    assert_same(ref, build_tree_triton(inputs), TREE_FIELDS)
    with pytest.raises(KernelInputError) as info:
        build_tree_torch(inputs)
    assert info.value.code == "SR210"


def test_build_tree_wrapper_on_both_backends_matches_reference(force_backend):
    inputs = tree_inputs(4, 3, 3, 9, seed=11, mode="qlen_only")
    ref = build_tree_reference(inputs)
    args = (inputs.bonus_tokens, inputs.parent_list, inputs.top_scores_index,
            inputs.draft_tokens, inputs.seq_lens)
    kw = dict(topk=3, depth=3, num_verify_tokens=9, mask_mode="qlen_only")
    for backend in ("torch", "triton"):
        assert_same(ref, build_tree(*args, **kw, backend=backend), TREE_FIELDS)
    force_backend("triton")
    assert_same(ref, build_tree(*args, **kw), TREE_FIELDS)


# --------------------------------------------------------------------------------- verify_greedy


def tree_case(b, topk, steps, n, vocab, seed):
    gen = torch.Generator().manual_seed(seed)
    inputs = tree_inputs(b, topk, steps, n, seed, "qlen_only")
    tree = build_tree_torch(inputs)
    links = (tree.draft_tokens.view(b, n) % vocab, tree.retrieve_index,
             tree.retrieve_next_token, tree.retrieve_next_sibling)
    return links, gen


def steer(links, predict, gen, share=0.6):
    """Candidates set to their parent's argmax for a share of the nodes: long accepted paths."""
    cand, _, nt, ns = links
    b, n = cand.shape
    parent = torch.zeros(b, n, dtype=torch.int64)
    for r in range(b):
        for node in range(n):
            child = int(nt[r, node])
            while child != -1:
                parent[r, child] = node
                child = int(ns[r, child])
    pick = torch.rand(b, n, generator=gen) < share
    return torch.where(pick, predict.gather(1, parent), cand).to(cand.dtype)


@pytest.mark.parametrize("shape", [(4, 2, 3, 7), (3, 3, 2, 9), (3, 1, 4, 5), (2, 4, 3, 16)])
def test_greedy_from_predicts_matches_reference(shape):
    b, topk, steps, n = shape
    links, gen = tree_case(b, topk, steps, n, 8, sum(shape))
    predict = torch.randint(0, 8, (b, n), generator=gen)
    cand = steer(links, predict, gen)
    args = (cand, *links[1:], predict)
    ref = verify_tree_greedy_reference(*args, depth=steps)
    assert int(ref.accept_token_num.sum()) > 0
    assert_same(ref, verify_tree_greedy_torch(*args, depth=steps), VERIFY_FIELDS)
    assert_same(ref, verify_tree_greedy_triton(*args, depth=steps), VERIFY_FIELDS)


@pytest.mark.parametrize("vocab", [37, 2 * FOLD_WIDTH + 3])  # the second takes the folded argmax
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_greedy_from_logits_matches_reference(vocab, dtype):
    b, topk, steps, n = 6, 3, 3, 10
    links, gen = tree_case(b, topk, steps, n, vocab, vocab)
    logits = torch.randint(-4, 4, (b, n, vocab), generator=gen).to(dtype)  # many ties
    cand = steer(links, torch.argmax(logits, -1), gen)
    args = (cand, *links[1:])
    ref = verify_tree_greedy_from_logits_reference(*args, logits, depth=steps)
    assert int(ref.accept_token_num.sum()) > 0
    assert_same(ref, verify_tree_greedy_from_logits_torch(*args, logits, depth=steps),
                VERIFY_FIELDS)
    for backend in ("torch", "triton"):
        got = verify_tree_greedy(*args, depth=steps, target_logits=logits, backend=backend,
                                 block_v=64 if backend == "triton" else None)
        assert_same(ref, got, VERIFY_FIELDS)


# ------------------------------------------------------------------------------- verify_sampling


def sampling_inputs(shape, vocab, seed, *, with_q, zero_q_rows=0, caller_coins=False,
                    **thresholds):
    """Random trees, rows, 64-bit keys and positions; the stream's coins (or, with
    `caller_coins`, uniforms laid out as SGLang's)."""
    b, topk, steps, n = shape
    links, gen = tree_case(b, topk, steps, n, vocab, seed)
    p = torch.softmax(torch.randn(b, n, vocab, generator=gen) * 2, -1)
    q = torch.softmax(torch.randn(b, n, vocab, generator=gen), -1) if with_q else None
    if q is not None:
        q[:zero_q_rows, 0] = 0.0  # these roots use the target-only rule
    cand = steer(links, torch.argmax(p, -1), gen, share=0.5)
    keys = fresh_keys(b, "cpu", generator=gen)
    positions = torch.randint(0, 1 << 40, (b,), generator=gen)
    if caller_coins:
        coins = caller_tree_coins(torch.rand(b, n, generator=gen))
    else:
        coins = stream_tree_coins(cand, links[2], links[3], keys, positions)
    return TreeSamplingInputs(cand, *links[1:], p, q, *coins, keys, positions, depth=steps,
                              **thresholds)


SAMPLING_SHAPES = [(6, 2, 3, 7), (5, 3, 2, 9), (4, 1, 3, 4), (3, 4, 3, 14)]


@pytest.mark.parametrize("caller_coins", [False, True])
@pytest.mark.parametrize("with_q", [False, True])
@pytest.mark.parametrize("shape", SAMPLING_SHAPES)
def test_sampling_matches_reference(shape, with_q, caller_coins):
    inputs = sampling_inputs(shape, 13, sum(shape), with_q=with_q, zero_q_rows=1,
                             caller_coins=caller_coins)
    ref = verify_tree_sampling_reference(inputs)
    assert int(ref.accept_token_num.sum()) > 0
    assert_same(ref, verify_tree_sampling_torch(inputs), VERIFY_FIELDS)
    assert_same(ref, verify_tree_sampling_triton(inputs, block_v=16), VERIFY_FIELDS)


@pytest.mark.parametrize("shape", SAMPLING_SHAPES)
def test_stream_coins_match_the_node_by_node_reference(shape):
    """The wrapper's stream coins (depths by pointer jumping, hashed in torch) against the
    reference's (depths by walking the links, `accept_coin` per node), bit for bit."""
    inputs = sampling_inputs(shape, 13, sum(shape), with_q=False)
    for r in range(inputs.candidates.shape[0]):
        links = (inputs.candidates[r].tolist(), inputs.next_token[r].tolist(),
                 inputs.next_sibling[r].tolist())
        coins, child = stream_coins_reference(*links, int(inputs.keys[r]),
                                              int(inputs.positions[r]))
        assert inputs.coins[r].tolist() == coins and inputs.child_coins[r].tolist() == child


@pytest.mark.parametrize("thresholds", [dict(threshold_acc=0.5), dict(threshold_single=0.3)])
def test_sampling_thresholds_match_reference(thresholds):
    inputs = sampling_inputs((6, 3, 3, 10), 11, 3, with_q=False, **thresholds)
    ref = verify_tree_sampling_reference(inputs)
    assert_same(ref, verify_tree_sampling_torch(inputs), VERIFY_FIELDS)
    assert_same(ref, verify_tree_sampling_triton(inputs), VERIFY_FIELDS)


@pytest.mark.parametrize("with_q", [False, True])
def test_sampling_cpu_chunked_branches_match_reference(monkeypatch, with_q):
    """The CPU-tuned residual-mass and final-draw paths in chunks of 2 requests, and with a
    lone request needing a mass (reduced beside a copy of itself)."""
    monkeypatch.setattr(sampling_torch_impl, "cpu_row_chunks",
                        functools.partial(cpu_row_chunks, elements=2 * 29))
    for shape in ((7, 2, 3, 7), (2, 3, 2, 9)):
        inputs = sampling_inputs(shape, 29, 17, with_q=with_q, zero_q_rows=1)
        ref = verify_tree_sampling_reference(inputs)
        assert_same(ref, verify_tree_sampling_torch(inputs), VERIFY_FIELDS)


@pytest.mark.parametrize("with_q", [False, True])
def test_sampling_accelerator_branches_match_reference(monkeypatch, with_q):
    """The branches CUDA without Triton takes (every request's rows, no host synchronisation),
    forced on the CPU, against the reference."""
    from specreg.kernels.tree_verify_sampling import torch_impl as tree_torch

    def unused(*args, **kwargs):
        raise AssertionError("a CPU-tuned branch ran")

    monkeypatch.setattr(tree_torch, "cpu_branches", lambda device: False)
    monkeypatch.setattr(tree_torch, "_residual_mass_cpu", unused)
    for shape in ((7, 2, 3, 7), (2, 3, 2, 9), (5, 1, 4, 5)):
        inputs = sampling_inputs(shape, 29, 17, with_q=with_q, zero_q_rows=1)
        assert_same(verify_tree_sampling_reference(inputs), verify_tree_sampling_torch(inputs),
                    VERIFY_FIELDS)


@pytest.mark.parametrize("probabilities", [False, True])
def test_params_path_matches_reference(probabilities):
    shape, vocab = (6, 2, 3, 7), 24
    b, _, steps, n = shape
    links, gen = tree_case(*shape, vocab, 21)
    target = 2 * torch.randn(b, n, vocab, generator=gen)
    target[:, :, :4] += 2.0
    draft = target + torch.randn(b, n, vocab, generator=gen)
    cand = links[0].clone()
    cand[:, 1:] = torch.randint(0, 4, (b, n - 1), generator=gen)
    if probabilities:
        target, draft = torch.softmax(target, -1), torch.softmax(draft, -1)
    params = SamplingParams.of(
        b, temperature=[0.0, 0.8, 1.2, 1.0, 0.7, 1.0], top_k=[0, 5, 0, 0, 8, 0],
        top_p=[1.0, 0.9, 0.8, 1.0, 1.0, 1.0], min_p=[0.0, 0.0, 0.05, 0.0, 0.0, 0.1],
        seed=[1, 2, 3, 4, 5, 6],
    )
    tree = (cand, *links[1:])
    positions = torch.arange(b) * 1000 + 7
    ref = verify_tree_with_params_reference(*tree, target, depth=steps, params=params,
                                            keys=request_keys(params), positions=positions,
                                            draft=draft, probabilities=probabilities)
    assert int(ref.accept_token_num.sum()) > 0
    for backend in ("torch", "triton"):
        got = verify_tree_with_params(*tree, target, depth=steps, params=params, draft=draft,
                                      probabilities=probabilities, positions=positions,
                                      backend=backend, block_v=16)
        assert_same(ref, got, (*VERIFY_FIELDS, "param_error"))


def test_params_path_invalid_requests_match_reference():
    shape, vocab = (3, 2, 3, 7), 16
    b, _, steps, n = shape
    links, gen = tree_case(*shape, vocab, 4)
    target = torch.randn(b, n, vocab, generator=gen)
    params = SamplingParams.of(3, temperature=[0.0, -1.0, 1.0], top_p=[1.0, 1.0, 0.0],
                               seed=[1, 2, 3])
    ref = verify_tree_with_params_reference(*links, target, depth=steps, params=params,
                                            keys=request_keys(params),
                                            positions=torch.zeros(b, dtype=torch.int64))
    for backend in ("torch", "triton"):
        got = verify_tree_with_params(*links, target, depth=steps, params=params,
                                      check_values=False, backend=backend)
        assert_same(ref, got, (*VERIFY_FIELDS, "param_error"))
