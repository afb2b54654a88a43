"""EAGLE under the lossy acceptance rules: the defaults are the lossless verifier bit for bit;
relaxed thresholds are the tree kernel's; typical and synthetic acceptance run the chain rule on
a topk-1 tree (synthetic also for greedy verification); paths a rule cannot reach are refused."""

import pytest
import torch
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg_eagle.verifier import EagleVerifier

from specreg.contract.acceptance_rules import AcceptanceRule
from specreg.step.chain_verifier import ChainVerifier
from specreg.errors import KernelInputError
from specreg.contract.sampling_params import SamplingParams
from tests.support.eagle import RESULT_FIELDS, links, make_tree


def _inputs(topk, seed=5, b=6):
    steps, vocab = 3, 11
    n = steps + 1 if topk == 1 else 6
    tree, gen = make_tree(b, topk, steps, n, vocab, seed)
    p = torch.softmax(2 * torch.randn(b, n, vocab, generator=gen), -1)
    keys = torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen)
    positions = torch.randint(0, 1000, (b,), generator=gen)
    if topk == 1:
        tree.draft_tokens.view(b, n)[:, 1:] = p[:, :-1].argmax(-1)
    return tree, p, keys, positions, steps, n


def _same(a, b):
    for f in RESULT_FIELDS[1:]:
        assert torch.equal(getattr(a, f), getattr(b, f)), f


@pytest.mark.parametrize("topk", [1, 2])
def test_defaults_are_the_lossless_verifier_and_thresholds_the_tree_kernels(topk):
    tree, p, keys, positions, steps, n = _inputs(topk, b=32)
    kwargs = dict(keys=keys, positions=positions)
    plain = EagleVerifier(num_steps=steps, topk=topk, num_draft_tokens=n)
    lossless = EagleVerifier(num_steps=steps, topk=topk, num_draft_tokens=n,
                             acceptance=AcceptanceRule())
    want = plain.verify_sampling(tree, p, **kwargs)
    got = lossless.verify_sampling(tree, p, **kwargs)
    assert torch.equal(got.num_accepted, want.num_accepted)
    assert torch.equal(got.output_tokens, want.output_tokens)
    relaxed = EagleVerifier(num_steps=steps, topk=topk, num_draft_tokens=n,
                            acceptance=AcceptanceRule(threshold_single=0.4, threshold_acc=0.3))
    out = relaxed.verify_sampling(tree, p, **kwargs)
    direct = verify_tree_sampling(*links(tree, n), p, depth=steps, threshold_single=0.4,
                                  threshold_acc=0.3, **kwargs)
    assert torch.equal(out.output_tokens, direct.output_tokens)
    assert int(out.num_accepted.sum()) > int(want.num_accepted.sum())


@pytest.mark.parametrize("rule", [AcceptanceRule(posterior_threshold=0.2),
                                  AcceptanceRule(synthetic_rates=(0.9, 0.6, 0.3))])
def test_chain_rules_on_a_topk1_tree_are_the_chain_verifiers(rule):
    tree, p, keys, positions, steps, n = _inputs(1)
    verifier = EagleVerifier(num_steps=steps, topk=1, num_draft_tokens=n, acceptance=rule)
    out = verifier.verify_sampling(tree, p, keys=keys, positions=positions)
    chain = ChainVerifier(n, acceptance=rule).verify_sampling(
        tree.draft_tokens.view(-1, n), p, None, keys=keys, positions=positions)
    assert torch.equal(out.num_accepted, chain.num_accepted)
    assert torch.equal(out.output_tokens[:, :n], chain.output_tokens)
    with pytest.raises(KernelInputError) as info:
        verifier.verify_from_logits(tree, torch.log(p), params=SamplingParams.of(6, temperature=1.0))
    assert info.value.code == "SR316"
    with pytest.raises(KernelInputError) as info:
        EagleVerifier(num_steps=steps, topk=2, num_draft_tokens=6, acceptance=rule)
    assert info.value.code == "SR315"


def test_synthetic_length_drives_eagle_greedy_verification():
    tree, p, _, _, steps, n = _inputs(1)
    verifier = EagleVerifier(num_steps=steps, topk=1, num_draft_tokens=n,
                             acceptance=AcceptanceRule(synthetic_length=3))
    out = verifier.verify_greedy(tree, torch.log(p), keys=torch.ones(6, dtype=torch.int64))
    assert out.num_accepted.tolist() == [2] * 6
    bonus_rows = p[torch.arange(6), 2].argmax(-1)
    assert torch.equal(out.bonus, bonus_rows)
    exact = EagleVerifier(num_steps=steps, topk=1, num_draft_tokens=n,
                          acceptance=AcceptanceRule(threshold_acc=0.5))
    want = EagleVerifier(num_steps=steps, topk=1, num_draft_tokens=n).verify_greedy(tree, torch.log(p))
    _same(exact.verify_greedy(tree, torch.log(p)), want)  # greedy stays exact under thresholds
