"""The "mixed params" row: its lossless check passes on real plans and fails when it should."""

import pytest
import torch

from specreg import Registry, hookimpl
from specreg.step.chain_verifier import ChainVerifier
from specreg.cli.demo import MIXED_PARAMS_LABEL, run_demo, toy_draft_checkpoint
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.testing.lossless import P_VALUE_THRESHOLD, check_mixed_params
from specreg.testing.toy_model import ToyConfig, ToyLM
from tests.support.plugins import SpecPlugin

SAMPLES = 2000


@pytest.fixture(scope="module")
def toy():
    target = ToyLM(ToyConfig(), seed=0)
    prompts = torch.randint(0, 95, (3, 8), generator=torch.Generator().manual_seed(0))
    return target, target.perturbed(0.25, seed=1), prompts


@pytest.fixture(scope="module")
def block_plan():
    config = ToyConfig()
    return Registry.load().resolve(
        {"algorithm": "dflash", "draft_config": toy_draft_checkpoint(config)}
    )


def test_the_check_passes_and_names_every_kind(toy, block_plan):
    target, draft, prompts = toy
    checked = check_mixed_params(block_plan, target, draft, prompts, 12, samples=SAMPLES, seed=3)
    assert checked.passed, (checked.first_mismatch, checked.p_values)
    assert checked.kinds == (
        "T=0.7", "T=1 top_k=20", "T=0.8 top_p=0.9", "T=1.3 min_p=0.1",
        "T=0.6 top_k=50 top_p=0.95 min_p=0.05",
    )
    # greedy and sampled requests really shared the batches
    assert checked.result.tokens.shape[0] == 6 * prompts.shape[0]


def _unfiltered(logits, *, temperature, **_):
    return filtered_distribution(logits, temperature=temperature)


def _unscaled(logits, *, temperature, **filters):
    return filtered_distribution(logits, temperature=1.0, **filters)


def test_negative_control_unfiltered_target_fails(toy, block_plan):
    """Three times the samples: top-p 0.9 cuts little mass at T=0.8, and at SAMPLES the
    control's p-value for that kind straddles the threshold across keys (1e-4 to 0.06 over
    seeds 0-5 of the keyed draws); at 3 x SAMPLES it is below 1e-14 for seeds 0-2."""
    target, draft, prompts = toy
    checked = check_mixed_params(
        block_plan, target, draft, prompts[:1], 2, samples=3 * SAMPLES, marginal=_unfiltered
    )
    assert checked.greedy_passed and not checked.passed
    by_kind = dict(zip(checked.kinds, checked.p_values, strict=True))
    assert by_kind["T=0.7"] > P_VALUE_THRESHOLD  # no filter: the same distribution
    filtering = [p for kind, p in by_kind.items() if kind != "T=0.7"]
    assert all(p < P_VALUE_THRESHOLD for p in filtering), by_kind


def test_negative_control_unscaled_target_fails(toy, block_plan):
    target, draft, prompts = toy
    checked = check_mixed_params(
        block_plan, target, draft, prompts[:1], 2, samples=SAMPLES, marginal=_unscaled
    )
    by_kind = dict(zip(checked.kinds, checked.p_values, strict=True))
    assert not checked.sampling_passed and by_kind["T=0.7"] < P_VALUE_THRESHOLD, by_kind


class _GreedyOffByOne(ChainVerifier):
    """Emits the token after the target's argmax for greedy requests of a mixed batch."""

    def verify_from_logits(self, candidates, target_logits, draft_logits=None, *, params, **kw):
        result = super().verify_from_logits(
            candidates, target_logits, draft_logits, params=params, **kw
        )
        rows = params.greedy.nonzero().flatten()
        slot = result.num_accepted.long()[rows]
        vocab = target_logits.shape[-1]
        result.output_tokens[rows, slot] = (result.output_tokens[rows, slot] + 1) % vocab
        return result


class _NoParams:
    """A verifier with only the protocol's methods: no per-request parameters."""

    rules = ("greedy", "chain_sampling")

    def __init__(self, inner):
        self.inner = inner
        self.num_draft_tokens = inner.num_draft_tokens
        self.widths = inner.widths

    def verify_greedy(self, candidates, target_logits, *, verify_lens=None):
        return self.inner.verify_greedy(candidates, target_logits, verify_lens=verify_lens)

    def verify_sampling(self, candidates, target_probs, draft_probs, **kw):
        return self.inner.verify_sampling(candidates, target_probs, draft_probs, **kw)


class _Verifiers(SpecPlugin):
    algorithms = ("offbyone", "noparams")

    @hookimpl
    def specreg_make_verifier(self, config, algorithm, resolution):
        n = config.num_draft_tokens
        if algorithm.name == "offbyone":
            return _GreedyOffByOne(num_draft_tokens=n)
        if algorithm.name == "noparams":
            return _NoParams(ChainVerifier(num_draft_tokens=n))
        return None


def test_mixed_row_catches_wrong_greedy_requests_and_follows_capability():
    registry = Registry()
    registry.register_plugin(_Verifiers(), "verifiers")
    rows = run_demo(kv_cache="none", steps=8, registry=registry)
    cases = [(r.algorithm, r.case) for r in rows]
    assert ("noparams", MIXED_PARAMS_LABEL) not in cases  # its verifier takes no params
    assert ("noparams", "default") in cases
    mixed = rows[cases.index(("offbyone", MIXED_PARAMS_LABEL))]
    assert mixed.error is None and not mixed.greedy_lossless and not mixed.lossless
    default = rows[cases.index(("offbyone", "default"))]
    assert default.lossless  # only the params path is wrong
