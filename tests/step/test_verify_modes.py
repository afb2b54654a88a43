"""Per-request verify modes: `invariant=` a bool tensor [b] verifies the requests that ask for the
drafter-invariant rule by it and the others by the standard rule, in one call, each request's
row equal to what it gets verified alone under its own mode; on the chain verifier (from
probabilities, from logits with per-request parameters) and the EAGLE tree verifier."""

import pytest
import torch
from specreg.kernels.tree_build import build_tree

from specreg import Registry
from specreg.step.chain_verifier import ChainVerifier
from specreg.errors import KernelInputError
from specreg.contract.sampling_params import SamplingParams
from tests.support.eagle import random_draft

B, N, V = 24, 4, 40


def _chain_case(seed):
    gen = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(B, N, V, generator=gen) * 2, -1)
    q = torch.softmax(torch.randn(B, N - 1, V, generator=gen) * 2, -1)
    drafts = torch.multinomial(q.reshape(-1, V), 1, generator=gen).view(B, N - 1)
    candidates = torch.cat([torch.zeros(B, 1, dtype=torch.int64), drafts], 1)
    keys = torch.randint(0, 2**62, (B,), generator=gen)
    positions = torch.randint(0, 2**30, (B,), generator=gen)
    mask = torch.rand(B, generator=gen) < 0.5
    return candidates, p, q, keys, positions, mask


def _rows(result, rows):
    return (result.num_accepted[rows].tolist(), result.output_tokens[rows].tolist(),
            result.bonus[rows].tolist(), result.accepted_index[rows].tolist())


def _alone(result, r):
    """Request r's row of a one-request result, its flat node rows moved to row r's."""
    index = result.accepted_index[0]
    moved = torch.where(index >= 0, index + r * result.width, index)
    return (result.num_accepted.tolist(), result.output_tokens.tolist(),
            result.bonus.tolist(), [moved.tolist()])


def test_chain_mixed_batch_rows_equal_each_request_alone_under_its_mode():
    candidates, p, q, keys, positions, mask = _chain_case(0)
    verifier = ChainVerifier(N)
    mixed = verifier.verify_sampling(candidates, p, q, keys=keys, positions=positions,
                                     invariant=mask)
    assert 0 < int(mask.sum()) < B
    differs = 0
    for r in range(B):
        one = slice(r, r + 1)
        alone = verifier.verify_sampling(candidates[one], p[one], q[one], keys=keys[one],
                                         positions=positions[one], invariant=bool(mask[r]))
        assert _rows(mixed, [r]) == _alone(alone, r)
        other = verifier.verify_sampling(candidates[one], p[one], q[one], keys=keys[one],
                                         positions=positions[one], invariant=not bool(mask[r]))
        differs += _alone(other, r) != _alone(alone, r)
    assert differs > 0  # the two rules differ on this batch, so the merge is tested


def test_chain_from_logits_with_params_mixes_modes_and_greedy_requests():
    candidates, p, q, keys, positions, mask = _chain_case(1)
    target, draft = p.log(), q.log()
    temperature = torch.where(torch.arange(B) % 5 == 0, 0.0, 0.8)
    params = SamplingParams.of(B, temperature=temperature, top_k=12, top_p=0.9)
    verifier = ChainVerifier(N)
    mixed = verifier.verify_from_logits(candidates, target, draft, params=params, keys=keys,
                                        positions=positions, invariant=mask)
    for mode in (True, False):
        whole = verifier.verify_from_logits(candidates, target, draft, params=params, keys=keys,
                                            positions=positions, invariant=mode)
        rows = (mask == mode).nonzero().flatten().tolist()
        assert _rows(mixed, rows) == _rows(whole, rows)


def test_a_uniform_tensor_is_the_bool_and_the_plan_mode_stays_the_default():
    candidates, p, q, keys, positions, _ = _chain_case(2)
    inputs = dict(keys=keys, positions=positions)
    verifier = ChainVerifier(N, verify_mode="invariant")
    plan_mode = verifier.verify_sampling(candidates, p, q, **inputs)
    every = verifier.verify_sampling(candidates, p, q, invariant=torch.ones(B, dtype=torch.bool),
                                     **inputs)
    none = verifier.verify_sampling(candidates, p, q, invariant=torch.zeros(B, dtype=torch.bool),
                                    **inputs)
    standard = ChainVerifier(N).verify_sampling(candidates, p, q, **inputs)
    assert _rows(every, slice(None)) == _rows(plan_mode, slice(None))
    assert _rows(none, slice(None)) == _rows(standard, slice(None))


@pytest.mark.parametrize(
    ("value", "words"),
    [
        (torch.ones(B, dtype=torch.int64), "torch.int64"),
        (torch.ones(B - 1, dtype=torch.bool), f"({B - 1},)"),
        (torch.ones(B, dtype=torch.bool, device="meta"), "meta"),
        ("invariant", "'invariant'"),
        (1, "1"),
    ],
)
def test_a_mode_that_is_not_a_bool_per_request_is_refused(value, words):
    candidates, p, q, keys, positions, _ = _chain_case(3)
    with pytest.raises(KernelInputError) as caught:
        ChainVerifier(N).verify_sampling(candidates, p, q, keys=keys, invariant=value)
    assert caught.value.problems[0].code == "SR133" and words in str(caught.value)
    assert f"bool tensor [{B}]" in str(caught.value)


def test_a_mixed_tensor_beside_a_lossy_rule_is_refused():
    from specreg.contract.acceptance_rules import AcceptanceRule

    candidates, p, q, keys, positions, mask = _chain_case(4)
    lossy = ChainVerifier(N, acceptance=AcceptanceRule(threshold_single=0.5))
    with pytest.raises(KernelInputError) as caught:
        lossy.verify_sampling(candidates, p, q, keys=keys, invariant=mask)
    assert caught.value.problems[0].code == "SR133"
    # all False asks for no invariant request: the lossy rule runs
    lossy.verify_sampling(candidates, p, q, keys=keys, invariant=torch.zeros(B, dtype=torch.bool))


def test_tree_mixed_batch_takes_each_request_from_its_mode():
    plan = Registry.load(allowlist={"eagle"}, fresh=True).resolve(
        {"algorithm": "eagle", "num_steps": 3, "topk": 2, "num_draft_tokens": 6}
    )
    gen = torch.Generator().manual_seed(5)
    parents, top_idx, drafts = random_draft(B, 2, 3, 6, V, gen)
    tree = build_tree(torch.randint(0, V, (B,), generator=gen), parents, top_idx, drafts,
                      torch.randint(1, 50, (B,), generator=gen), topk=2, depth=3,
                      num_verify_tokens=6, mask_mode="qlen_only")
    p = torch.softmax(torch.randn(B, 6, V, generator=gen) * 2, -1)
    keys = torch.randint(0, 2**62, (B,), generator=gen)
    mask = torch.rand(B, generator=gen) < 0.5
    mixed = plan.verifier.verify_sampling(tree, p, keys=keys, invariant=mask)
    for mode in (True, False):
        whole = plan.verifier.verify_sampling(tree, p, keys=keys, invariant=mode)
        rows = (mask == mode).nonzero().flatten().tolist()
        assert _rows(mixed, rows) == _rows(whole, rows)
        assert mixed.predicts.view(B, 6)[rows].tolist() == whole.predicts.view(B, 6)[rows].tolist()
