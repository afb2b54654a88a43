"""The drafter-invariant verify mode end to end through the reference loop, for every built-in
algorithm (chains, blocks, EAGLE chains and trees, Medusa's heads, history trees): with `verify_mode='invariant'` the tokens equal plain keyed sampling token for token
(the same loop with every draft length 0, i.e. one plain SAMPLE-role draw per step), for any
drafter, alone or in a batch, with per-request sampling parameters too; a request's tokens are a
function of its key alone. The standard rule keeps its own (lossless, different) tokens, so the
equality is not a property of every verifier: the control shows it differs there."""

from __future__ import annotations

import pytest
import torch

from specreg import Registry
from specreg.cli.demo import toy_draft_checkpoint
from specreg.contract.sampling_params import SamplingParams
from specreg.testing import ToyConfig, ToyLM
from specreg.testing.loop import SpeculativeLoop

TOY = ToyConfig()
DRAFT_CONFIG = toy_draft_checkpoint(TOY)
LOOKUP = {"prompt_lookup_min": 1, "prompt_lookup_max": 3}
NUM_NEW = 24

CASES = {
    "dspark": {"algorithm": "dspark", "draft_config": DRAFT_CONFIG},
    "dflash": {"algorithm": "dflash", "draft_config": DRAFT_CONFIG},
    "ngram": {"algorithm": "ngram", "num_steps": 3, "draft_config": LOOKUP},
    "ngram-tree": {"algorithm": "ngram", "num_steps": 3,
                   "draft_config": {**LOOKUP, "proposals": "tree"}},
    "suffix": {"algorithm": "suffix", "num_steps": 3, "draft_config": {"max_tree_depth": 16}},
    "draft_model": {"algorithm": "draft_model", "num_steps": 3},
    "eagle-chain": {"algorithm": "eagle", "num_steps": 3, "topk": 1},
    "eagle-tree": {"algorithm": "eagle", "num_steps": 3, "topk": 4, "num_draft_tokens": 8},
    "medusa": {"algorithm": "medusa", "num_steps": 3},
}


@pytest.fixture(scope="module")
def registry():
    return Registry.load(
        allowlist={"dspark", "lookup", "draft_model", "eagle", "medusa"}, fresh=True
    )


@pytest.fixture(scope="module")
def models():
    target = ToyLM(TOY, seed=0)
    return target, target.perturbed(0.25, seed=12)


def _prompts(b):
    motif = torch.randint(0, TOY.vocab_size, (b, 5), generator=torch.Generator().manual_seed(3))
    return motif.repeat(1, 5)[:, :24]  # repetitive: the lookup drafters find matches


def _generate(registry, models, case, *, mode, keys, prompts, lengths=None, **kwargs):
    plan = registry.resolve({**CASES[case], "verify_mode": mode})
    target, draft = models
    loop = SpeculativeLoop(plan, target, draft, keys=keys, draft_lengths=lengths, seed=5,
                           **kwargs)
    return loop.generate(prompts, NUM_NEW)


@pytest.mark.parametrize("case", sorted(CASES))
def test_invariant_mode_equals_plain_keyed_sampling(registry, models, case):
    b = 4
    keys = torch.tensor([11, 12, 13, 14])
    prompts = _prompts(b)
    spec = _generate(registry, models, case, mode="invariant", keys=keys, prompts=prompts,
                     sampling=True)
    plain = _generate(registry, models, case, mode="invariant", keys=keys, prompts=prompts,
                      sampling=True, lengths=[0] * b)
    assert torch.equal(spec.tokens, plain.tokens)
    # speculation really ran: drafts were accepted (none without drafts)
    assert sum(spec.acceptance.position_accepted) > 0
    assert sum(plain.acceptance.position_accepted) == 0
    # a request's tokens depend on its key alone: the same request alone, at another row
    alone = _generate(registry, models, case, mode="invariant", keys=keys[2:3],
                      prompts=prompts[2:3], sampling=True)
    assert torch.equal(alone.tokens[0], spec.tokens[2])


def test_standard_rule_is_not_drafter_invariant(registry, models):
    """Control: the standard rejection rule is lossless but emits other tokens than plain keyed
    sampling (its corrections race in the RESIDUAL role), so the equality above is the
    invariant rule's, not the test's."""
    b = 4
    keys = torch.tensor([11, 12, 13, 14])
    prompts = _prompts(b)
    spec = _generate(registry, models, "draft_model", mode="standard", keys=keys,
                     prompts=prompts, sampling=True)
    plain = _generate(registry, models, "draft_model", mode="standard", keys=keys,
                      prompts=prompts, sampling=True, lengths=[0] * b)
    assert not torch.equal(spec.tokens, plain.tokens)


@pytest.mark.parametrize("case", ["dspark", "draft_model", "ngram", "eagle-tree", "medusa"])
def test_invariant_mode_with_request_parameters(registry, models, case):
    """Mixed greedy and sampled requests with their own top-k/top-p/min-p and seeds: each
    request's tokens equal plain keyed sampling of its processed rows."""
    b = 4
    params = SamplingParams.of(
        b, temperature=[0.0, 0.8, 1.0, 1.3], top_k=[0, 20, 0, 5], top_p=[1.0, 0.9, 0.8, 1.0],
        min_p=[0.0, 0.0, 0.05, 0.0], seed=[-1, 7, 8, -1],
    )
    keys = torch.tensor([21, 22, 23, 24])
    prompts = _prompts(b)
    spec = _generate(registry, models, case, mode="invariant", keys=keys, prompts=prompts,
                     params=params)
    plain = _generate(registry, models, case, mode="invariant", keys=keys, prompts=prompts,
                      params=params, lengths=[0] * b)
    assert torch.equal(spec.tokens, plain.tokens)
