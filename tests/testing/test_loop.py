"""The reference loop driven only by a SpecPlan: lossless for every built-in algorithm."""

from __future__ import annotations

import pytest
import torch

from specreg import Phase, Registry
from specreg.cli.demo import toy_draft_checkpoint
from specreg.testing import ToyConfig, ToyLM, check_greedy, check_sampling
from specreg.testing.kv import toy_cache_options
from specreg.testing.lossless import chi_square_p_value, target_marginals

TOY = ToyConfig()
DRAFT_CONFIG = toy_draft_checkpoint(TOY)
BONUS_ANCHOR = toy_draft_checkpoint(TOY, speculators_model_type="dspark", block_size=5)

CASES = {
    "eagle-chain": {"algorithm": "eagle", "num_steps": 3, "topk": 1},
    "eagle-tree": {"algorithm": "eagle", "num_steps": 3, "topk": 4, "num_draft_tokens": 8},
    "eagle3-tree": {"algorithm": "eagle3", "num_steps": 2, "topk": 2, "num_draft_tokens": 5},
    "dspark-dense": {"algorithm": "dspark", "draft_config": DRAFT_CONFIG},
    "dspark-bonus-anchor": {"algorithm": "dspark", "draft_config": BONUS_ANCHOR},
    "dflash": {"algorithm": "dflash", "draft_config": DRAFT_CONFIG},
}


@pytest.fixture(scope="module")
def registry():
    return Registry.load(allowlist={"eagle", "dspark", "hisparse"}, fresh=True)


@pytest.fixture(scope="module")
def models():
    target = ToyLM(TOY, seed=11)
    return target, target.perturbed(0.25, seed=12)


@pytest.fixture(scope="module")
def prompts():
    return torch.randint(0, TOY.vocab_size - 1, (4, 24), generator=torch.Generator().manual_seed(13))


@pytest.mark.parametrize("cache", [None, "hisparse"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_greedy_equals_plain_greedy(registry, models, prompts, case, cache):
    config = dict(CASES[case])
    if cache:
        config["cache"] = cache
        config["cache_options"] = toy_cache_options(3000, 160, models[0])
    plan = registry.resolve(config)
    target, draft = models
    check = check_greedy(plan, target, draft, prompts, 32)
    assert check.passed, f"first mismatch at column {check.first_mismatch}"
    result = check.result
    assert result.mean_accepted_length > 1.0  # speculation actually accepted drafts
    assert result.target_forwards < 32
    if cache:
        stats = result.reader_stats
        assert stats["swap_calls"] == result.target_forwards
        assert 0.0 < stats["hit_rate"] < 1.0 and stats["bytes_copied"] > 0


@pytest.mark.parametrize("cache", [None, "hisparse"])
@pytest.mark.parametrize("case", sorted(CASES))
def test_sampling_matches_the_target_distribution(registry, models, prompts, case, cache):
    config = dict(CASES[case])
    if cache:
        config["cache"] = cache
        config["cache_options"] = toy_cache_options(3000, 160, models[0])
    plan = registry.resolve(config)
    target, draft = models
    check = check_sampling(plan, target, draft, prompts[0], samples=3000, seed=5)
    assert check.passed, check.p_values


def test_sampling_check_has_power(registry, models, prompts):
    """Negative control: a verifier accepting with the wrong q is caught by the same test."""
    plan = registry.resolve(CASES["dflash"])
    target, draft = models
    verifier = plan.verifier

    class WrongQ:
        def __getattr__(self, name):
            return getattr(verifier, name)

        def verify_sampling(self, candidates, target_probs, draft_probs, **kwargs):
            flat = torch.full_like(draft_probs, 1.0 / draft_probs.shape[-1])
            return verifier.verify_sampling(candidates, target_probs, flat, **kwargs)

    biased = plan.__class__(
        algorithm=plan.algorithm, cache=None, resolution=plan.resolution,
        verifier=WrongQ(), cache_swapper=None, drafter=plan.drafter,
    )
    check = check_sampling(biased, target, draft, prompts[0], samples=3000, seed=5)
    assert not check.passed, check.p_values


def test_buffers_follow_the_plan_widths(registry):
    plan = registry.resolve(CASES["dspark-dense"])
    assert plan.num_tokens_per_req(Phase.TARGET_VERIFY) == plan.gamma + 1
    assert plan.num_tokens_per_req(Phase.TARGET_VERIFY, is_draft_worker=True) == plan.gamma


def test_exact_marginals_sum_to_one(models):
    target, _ = models
    first, second = target_marginals(target, torch.arange(24), 1.0)
    assert abs(float(first.sum()) - 1) < 1e-9 and abs(float(second.sum()) - 1) < 1e-9


def test_chi_square_helper():
    probs = torch.tensor([0.5, 0.25, 0.25, 0.0])
    assert chi_square_p_value(torch.tensor([500, 250, 250, 0]), probs) > 0.99
    assert chi_square_p_value(torch.tensor([700, 150, 150, 0]), probs) < 1e-6
    assert chi_square_p_value(torch.tensor([500, 250, 249, 1]), probs) == 0.0
