"""The SGLang-signature kernels of `tree_verify`, without SGLang: filtering against specreg's
filtering reference, min-p per request, the verify-call context and SGLang's output contract,
and the sampling kernels' keys: SGLang's acceptance decisions on its coins, the final token
raced on specreg's stream by the request's seed and sequence length (or a fresh key).
(`test_sglang_tree_verify.py` runs them inside SGLang against its Triton kernels.)"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import torch
from specreg.kernels.tree_verify_greedy import verify_tree_greedy

from specreg.adapters import sglang_tree_kernels as kernels
from specreg.errors import KernelInputError
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.random_stream.reference import draw_lanes
from specreg.kernels.random_stream.types import RESIDUAL_ROLE
from specreg.kernels.sampling.reference import block_race_reference


def rows(count: int, vocab: int, seed: int) -> torch.Tensor:
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn((count, vocab), generator=gen) * 3.0
    logits[::4, : vocab // 2] = logits[::4, :1]  # ties, some at a cut
    return torch.softmax(logits, -1)


def reference(p: torch.Tensor, **filters) -> torch.Tensor:
    return torch.stack([filtered_distribution(row, temperature=1.0, probabilities=True, **filters)
                        for row in p]).to(torch.float32)


@pytest.mark.parametrize("filters", [
    {"top_k": 5}, {"top_p": 0.8}, {"min_p": 0.1}, {"top_k": 20, "top_p": 0.6, "min_p": 0.05},
])
def test_filter_probs_keeps_the_reference_set_and_renormalises(filters):
    p = rows(64, 48, seed=3)
    tensors = {name: torch.full((64,), value) for name, value in filters.items()}
    ours, expected = kernels.filter_probs(p, **tensors), reference(p, **filters)
    assert torch.equal(ours > 0, expected > 0)
    torch.testing.assert_close(ours, expected, atol=1e-6, rtol=1e-5)


def test_sglangs_sequence_of_renorms_then_min_p_is_the_combined_rule():
    p = rows(64, 48, seed=4)
    step = kernels.top_k_renorm_prob(p, torch.full((64, 1), 20, dtype=torch.int32))
    step = kernels.top_p_renorm_prob(step, torch.full((64,), 0.6))
    step = kernels.filter_probs(step, min_p=torch.full((64,), 0.05))
    expected = reference(p, top_k=20, top_p=0.6, min_p=0.05)
    assert torch.equal(step > 0, expected > 0)
    torch.testing.assert_close(step, expected, atol=1e-6, rtol=1e-5)


def test_sglangs_all_tokens_top_k_keeps_every_token():
    p = rows(8, 16, seed=5)
    torch.testing.assert_close(kernels.top_k_renorm_prob(p, kernels.SGLANG_TOP_K_ALL), p)


def test_min_p_touches_only_the_requests_that_ask_for_it():
    b, n, vocab = 4, 3, 16
    p = rows(b * n, vocab, seed=6).view(b, n, vocab)
    info = SimpleNamespace(need_min_p_sampling=True, min_ps=torch.tensor([0.0, 0.2, 0.0, 0.4]))
    out = kernels.with_min_p(p, info)
    assert torch.equal(out[[0, 2]], p[[0, 2]])
    for r in (1, 3):
        expected = reference(p[r], min_p=float(info.min_ps[r]))
        torch.testing.assert_close(out[r], expected, atol=1e-6, rtol=1e-5)
    assert kernels.with_min_p(p, None) is p  # outside an eagle_sample call
    assert kernels.with_min_p(p, SimpleNamespace(need_min_p_sampling=False)) is p


def test_the_verify_call_context_holds_the_batch_only_during_the_call():
    batch = SimpleNamespace(sampling_info=object())
    seen = kernels.verify_call(lambda *a, **k: kernels.CURRENT_SAMPLING_INFO.get(), None, batch)
    assert seen is batch.sampling_info and kernels.CURRENT_SAMPLING_INFO.get() is None
    with pytest.raises(RuntimeError):
        kernels.verify_call(lambda *a, **k: (_ for _ in ()).throw(RuntimeError()), None, batch)
    assert kernels.CURRENT_SAMPLING_INFO.get() is None


def test_outputs_are_written_only_on_the_accepted_path_as_sglangs_kernels_write_them():
    b, n, depth = 2, 4, 3
    cand = torch.tensor([[5, 1, 2, 3], [5, 1, 2, 3]])
    index = torch.arange(b * n).view(b, n)
    nt = torch.tensor([[1, 2, 3, -1]] * b)
    ns = torch.full((b, n), -1)
    predict = torch.tensor([[1, 2, 0, 0], [0, 0, 0, 0]])  # request 0 accepts 2, request 1 none
    predicts = torch.full((b * n,), 77, dtype=torch.int32)
    accept_index = torch.full((b, depth + 1), 77, dtype=torch.int32)
    num = torch.full((b,), 77, dtype=torch.int32)
    kernels.verify_tree_greedy(predicts, accept_index, num, cand, index, nt, ns, predict)
    assert predicts.tolist() == [1, 2, 0, 77, 0, 77, 77, 77]
    assert accept_index.tolist() == [[0, 1, 2, 77], [4, 77, 77, 77]]
    assert num.tolist() == [2, 0]
    direct = verify_tree_greedy(cand, index, nt, ns, depth=depth, target_predict=predict)
    assert direct.accept_token_num.tolist() == [2, 0]


def test_bad_buffers_are_coded_before_anything_is_written():
    cand = torch.zeros((2, 4), dtype=torch.int64)
    links = (cand, torch.arange(8).view(2, 4), torch.full((2, 4), -1), torch.full((2, 4), -1))
    predicts = torch.full((8,), 77, dtype=torch.int32)
    with pytest.raises(KernelInputError) as info:
        kernels.verify_tree_greedy(predicts, torch.full((2, 4), -1, dtype=torch.int32),
                                   torch.zeros(3, dtype=torch.int32), *links, cand)
    assert info.value.problems[0].code == "SR900"
    assert predicts.tolist() == [77] * 8


# ------------------------------------------------------------------------------- sampling
# The sampling kernels take SGLang's acceptance uniforms (the same decisions as SGLang's
# kernels on them) and draw the final token by specreg's exact race on its random stream,
# keyed by the request's sampling_seed and sequence length, or by a fresh key when SGLang does
# not seed it; SGLang's final coin is not read. The tests check the decisions against SGLang's
# rule written out here, the seeded final tokens against the race over hand-computed weights
# (`block_race_reference`, `draw_lanes`), and the unseeded ones by their distribution.


def sglang_target_only_path(cand, nt, ns, p, coins, depth):
    """SGLang's target-only walk (its kernel's pseudocode, thresholds 1): the accepted nodes,
    and the tokens tried and rejected at the last one."""
    path, row, coin, prob_acc, tried = [0], 0, float(coins[0]), 0.0, []
    for _ in range(depth):
        cur = int(nt[row])
        while cur != -1:
            prob_acc += float(p[row, int(cand[cur])])
            if coin <= prob_acc:
                path.append(cur)
                row, coin, prob_acc, tried = cur, float(coins[cur]), 0.0, []
                break
            tried.append(int(cand[cur]))
            cur = int(ns[cur])
        if cur == -1:
            break
    return path, tried


def sglang_buffers(b, n, depth):
    return (torch.zeros(b * n, dtype=torch.int32), torch.full((b, depth + 1), -1, dtype=torch.int32),
            torch.zeros(b, dtype=torch.int32))


def in_eagle_sample(fn, *, seeds=None, seq_lens=None):
    """Run `fn` as eagle_sample's sampling kernel call runs: inside `verify_call`, with a batch
    whose sampling info carries `seeds` (SGLang's sampling_seed) and whose seq_lens are given."""
    info = SimpleNamespace(sampling_seed=seeds, need_min_p_sampling=False)
    batch = SimpleNamespace(sampling_info=info, seq_lens=seq_lens)
    return kernels.verify_call(lambda *a, **k: fn(), None, batch)


# A tree of 5 nodes: root -> 1, 2; node 1 -> 3, 4.
TREE_NT, TREE_NS = [1, 3, -1, -1, -1], [-1, 2, -1, 4, -1]


def _tree_case(b, vocab, seed):
    gen = torch.Generator().manual_seed(seed)
    n = len(TREE_NT)
    cand = torch.stack([torch.randperm(vocab, generator=gen)[:n] for _ in range(b)])
    logits = torch.randn(b, n, vocab, generator=gen)
    steer = torch.arange(b) % 3 != 0  # two requests in three: the first children likely
    for child, parent in ((1, 0), (3, 1)):
        logits[steer, parent, cand[steer, child]] += 7.0
    p = torch.softmax(logits, -1)
    nt, ns = torch.tensor([TREE_NT] * b), torch.tensor([TREE_NS] * b)
    coins = torch.rand(b, n, generator=gen)
    return cand, torch.arange(b * n).view(b, n), nt, ns, p, coins


def test_seeded_target_only_sampling_decides_as_sglang_and_draws_by_the_seeds_race():
    b, vocab, depth = 24, 300, 2
    cand, index, nt, ns, p, coins = _tree_case(b, vocab, 3)
    n = cand.shape[1]
    seeds = torch.arange(40, 40 + b, dtype=torch.int64)
    seq_lens = torch.arange(b) * 7 + 3
    out = sglang_buffers(b, n, depth)
    in_eagle_sample(lambda: kernels.tree_sampling_target_only(
        *out, cand, index, nt, ns, coins, torch.rand(b), p, torch.zeros_like(p)),
        seeds=seeds, seq_lens=seq_lens)
    predicts, accept_index, num = out
    rejected = 0
    for r in range(b):
        path, tried = sglang_target_only_path(cand[r], nt[r], ns[r], p[r], coins[r], depth)
        assert accept_index[r, : len(path)].tolist() == [r * n + node for node in path], r
        assert int(num[r]) == len(path) - 1
        last = path[-1]
        # the final token: p at the last node without the children tried there, raced under
        # (seed, RESIDUAL role, seq_len + 1 + accepted): a tree's final draw never reads the
        # SAMPLE role, from which a tree drafter draws its children
        weights = [0.0 if t in tried else w for t, w in enumerate(p[r, last].tolist())]
        lanes = draw_lanes(int(seeds[r]), RESIDUAL_ROLE, int(seq_lens[r]) + len(path))
        assert int(predicts[r * n + last]) == block_race_reference(weights, lanes), r
        rejected += bool(tried)
    assert 0 < rejected < b and int(num.sum()) > b // 2  # rejections and leaves, past the root


def test_a_seeded_request_draws_the_same_alone_and_in_a_batch():
    b, vocab, depth = 6, 40, 2
    cand, index, nt, ns, p, coins = _tree_case(b, vocab, 5)
    n = cand.shape[1]
    seeds, seq_lens = torch.arange(b, dtype=torch.int64) + 9, torch.arange(b) + 20
    batch = sglang_buffers(b, n, depth)
    in_eagle_sample(lambda: kernels.tree_sampling_target_only(
        *batch, cand, index, nt, ns, coins, torch.rand(b), p, torch.zeros_like(p)),
        seeds=seeds, seq_lens=seq_lens)
    for r in range(b):
        one = sglang_buffers(1, n, depth)
        rows = slice(r, r + 1)
        in_eagle_sample(lambda rows=rows, one=one: kernels.tree_sampling_target_only(
            *one, cand[rows], torch.arange(n)[None], nt[rows], ns[rows], coins[rows],
            torch.rand(1), p[rows], torch.zeros_like(p[rows])),
            seeds=seeds[rows], seq_lens=seq_lens[rows])
        path = one[1][0][one[1][0] >= 0].long()
        assert torch.equal(one[1][0][one[1][0] >= 0] + r * n, batch[1][r][batch[1][r] >= 0])
        assert torch.equal(one[0][path], batch[0][path + r * n]), r


def _first_emitted(predicts, accept_index):
    return predicts[accept_index[:, 0].long()]


def test_unseeded_final_tokens_follow_the_target():
    """Unseeded requests (fresh keys): the first emitted token of the target-only rule, and of
    the chain rule with SGLang's q, is distributed as p of the root's row (chi-square), on the
    same final coin for every request (which specreg does not read)."""
    from specreg.testing.lossless import P_VALUE_THRESHOLD, chi_square_p_value

    samples, vocab, n = 20000, 6, 3
    p_root = torch.tensor([0.3, 0.25, 0.2, 0.15, 0.07, 0.03])
    q_root = torch.tensor([0.05, 0.1, 0.15, 0.2, 0.25, 0.25])
    gen = torch.Generator().manual_seed(11)
    torch.manual_seed(12)  # the fresh keys come from torch's generator, as SGLang's coins do
    p = p_root.expand(samples, n, vocab).contiguous()
    index = torch.arange(samples * n).view(samples, n)
    same_final = torch.full((samples,), 0.5)
    # target-only: root -> two distinct children
    cand = torch.zeros(samples, n, dtype=torch.int64)
    cand[:, 1:] = torch.stack([torch.randperm(vocab, generator=gen)[:2] for _ in range(samples)])
    nt, ns = torch.tensor([[1, -1, -1]] * samples), torch.tensor([[-1, 2, -1]] * samples)
    out = sglang_buffers(samples, n, 1)
    in_eagle_sample(lambda: kernels.tree_sampling_target_only(
        *out, cand, index, nt, ns, torch.rand(samples, n, generator=gen), same_final, p,
        torch.zeros_like(p)), seq_lens=torch.full((samples,), 5))
    first = _first_emitted(out[0], out[1])
    assert chi_square_p_value(torch.bincount(first, minlength=vocab), p_root) > P_VALUE_THRESHOLD
    # chain rule: root -> 1 -> 2, each draft drawn from q
    chain = torch.zeros(samples, n, dtype=torch.int64)
    chain[:, 1:] = torch.multinomial(q_root.expand(samples, vocab), 2, replacement=True,
                                     generator=gen)
    nt, ns = torch.tensor([[1, 2, -1]] * samples), torch.full((samples, n), -1)
    q = q_root.expand(samples, n - 1, vocab).contiguous()
    out = sglang_buffers(samples, n, 2)
    in_eagle_sample(lambda: kernels.chain_sampling(
        None, *out, chain, index, nt, ns, torch.rand(samples, n, generator=gen), same_final, p,
        q), seq_lens=torch.full((samples,), 5))
    first = _first_emitted(out[0], out[1])
    assert float((out[2] > 0).float().mean()) > 0.3  # drafts accepted: both paths exercised
    assert chi_square_p_value(torch.bincount(first, minlength=vocab), p_root) > P_VALUE_THRESHOLD


def test_stream_keys_are_the_seeds_at_the_depth_one_position_or_fresh():
    seeds, seq_lens = torch.tensor([5, 2**40]), torch.tensor([7, 100])
    keys, positions = in_eagle_sample(lambda: kernels.stream_keys(2, torch.device("cpu")),
                                      seeds=seeds, seq_lens=seq_lens)
    assert keys.tolist() == [5, 2**40] and positions.tolist() == [8, 101]
    one, _ = in_eagle_sample(lambda: kernels.stream_keys(2, torch.device("cpu")),
                             seq_lens=seq_lens)
    two, where = kernels.stream_keys(2, torch.device("cpu"))  # outside an eagle_sample call
    assert not torch.equal(one, two) and where.tolist() == [0, 0]
