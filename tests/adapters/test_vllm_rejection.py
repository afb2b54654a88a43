"""vLLM's rejection sampler through specreg's `rejection_sampler` substitution, in the pinned
vLLM: loaded by vLLM's own plugin loader, compared with vLLM's own `RejectionSampler.forward`
(its Triton kernels under the interpreter) and with the distribution of vLLM's plain sampler.

Pinned counts (one run of tests/adapters/vllm_rejection_run.py, fixed seeds): 60 random greedy
batches (penalties, bad words and min_p in half of them, 15 drafts padded with -1, 18 batches
read in place) equal token for token; 12 greedy batches with a logit bias equal vLLM's forward
on pre-biased logits; 30 sampled batches (temperature, top-k, top-p, seeds) agree with vLLM's
kernel on all 168 acceptance decisions from the same uniforms (39 bonus tokens equal, 76
corrections drawn); 12,000 sampled requests per lossless scenario.
"""

from __future__ import annotations

from pathlib import Path

import pytest
from scipy.stats import chisquare

from tests.adapters.conftest import run_in_env

HERE = Path(__file__).parent
SCRIPT = str(HERE / "vllm_rejection_run.py")
P_THRESHOLD = 1e-3
ON = {"SPECREG_VLLM": "enforce", "SPECREG_VLLM_SUBSTITUTE": "rejection_sampler"}
ORACLE = {"CUDA_VISIBLE_DEVICES": "", "TRITON_INTERPRET": "1"}  # vLLM's Triton, interpreted
COUNTS = {"greedy_batches": 60, "bias_batches": 12, "sampled_batches": 30, "samples": 12000}


@pytest.fixture(scope="module")
def runs(framework_env, model_dirs):
    """The substitution on and off, side by side: children of one framework process that
    imports vLLM once (one_import.py)."""
    payload = {"target": str(model_dirs["llama"]), **COUNTS}
    runs = {"on": {"env": ON, "payload": {**payload, "mode": "on"}},
            "off": {"env": {}, "payload": {**payload, "mode": "off"}}}
    return run_in_env(framework_env, SCRIPT, {"payload": payload, "runs": runs}, timeout=600,
                      args=("--runs",), **ORACLE)


def _pvalue(counts: list[int], probs: list[float]) -> float:
    """Chi-square p-value; a token of probability 0 must never occur (checked, then dropped)."""
    assert sum(c for c, p in zip(counts, probs, strict=True) if p <= 0) == 0, (counts, probs)
    kept = [(c, p) for c, p in zip(counts, probs, strict=True) if p > 0]
    total = sum(c for c, _ in kept)
    if len(kept) == 1:
        return 1.0
    return float(chisquare([c for c, _ in kept],
                           [p / sum(q for _, q in kept) * total for _, p in kept]).pvalue)


# ------------------------------------------------------------------------------ on and off
def test_off_patches_nothing(runs):
    seams = runs["off"]["seams"]
    assert seams["active"] == []
    assert seams["sampler_original"] and seams["logitsprocs_original"]
    assert seams["validation_original"] and seams["v2_sampler_original"]


def test_off_vllm_still_refuses_min_p_and_logit_bias_with_speculation(runs):
    refusals = runs["off"]["validation"]["refusals"]
    assert refusals["plain"] is None
    for name in ("min_p", "logit_bias"):
        assert "not yet supported with speculative decoding" in refusals[name], refusals


def test_on_every_seam_is_specregs_and_reported_active(runs):
    seams = runs["on"]["seams"]
    assert seams["active"] == ["rejection_sampler"]
    assert seams["sampler"].endswith("SpecregRejectionSampler")
    assert not (seams["sampler_original"] or seams["logitsprocs_original"]
                or seams["validation_original"] or seams["v2_sampler_original"])


def test_a_min_p_request_passes_vllms_own_validation_with_speculation(runs):
    """vLLM's real SamplingParams.verify against the SpeculativeConfig vLLM built (ngram, k 3)."""
    validation = runs["on"]["validation"]
    assert validation["method"] == "ngram" and validation["k"] == 3
    assert validation["refusals"] == {"min_p": None, "logit_bias": None, "plain": None}


def test_the_runner_builds_min_p_and_logit_bias_state_with_speculation(runs):
    built = runs["on"]["builders"]
    assert built["processors"] == [
        "LogitBiasLogitsProcessor", "MinPLogitsProcessor", "MinTokensLogitsProcessor"]
    assert "Custom logits processors are not supported" in built["custom"]  # still vLLM's


def test_what_the_substitution_does_not_cover_is_refused_when_vllm_builds_it(runs):
    built = runs["on"]["builders"]
    assert "SR188" in built["v2"] and "VLLM_USE_V2_MODEL_RUNNER=0" in built["v2"]
    assert "SR188" in built["synthetic"] and "rejection_sample_method='synthetic'" in built[
        "synthetic"]
    assert "SR188" in built["probabilistic"] and "draft_sample_method" in built["probabilistic"]


def test_a_draft_outside_the_vocabulary_is_specregs_coded_kernel_error(runs):
    assert "SR903" in runs["on"]["bad_input"]["error"]


def test_specreg_wins_over_the_platforms_later_kernel_overrides(runs):
    """init_worker loads plugins, then the platform's kernel overrides: they rebind vLLM's
    rejection kernels (here the CPU platform's C++ fallbacks, absent in this build, so vLLM's
    own sampler now fails), and the substituted sampler, which never launches them, still
    verifies."""
    platform = runs["on"]["platform"]
    assert platform["kernel_after_overrides"] == "KernelOverride"
    assert "_C" in platform["vllm"]
    assert isinstance(platform["specreg"], list) and len(platform["specreg"]) == 2


# ------------------------------------------------------------------------- oracle comparisons
def test_greedy_equals_vllms_own_forward_token_for_token(runs):
    greedy = runs["on"]["greedy"]
    assert greedy["batches"] == COUNTS["greedy_batches"]
    assert greedy["equal"] == greedy["batches"], greedy["first_diff"]
    # pinned: -1 drafts were compared, not skipped, and batches whose requests all have the
    # same number of drafts (vLLM's logits read in place, no copy)
    assert (greedy["padded_drafts"], greedy["uniform_batches"]) == (15, 18)


def test_logit_bias_is_applied_at_every_verified_position_and_the_bonus(runs):
    bias = runs["on"]["logit_bias"]
    assert bias["equal"] == bias["batches"] == COUNTS["bias_batches"]
    assert bias["changed_by_bias"] == bias["batches"]  # the bias decided something each time


def test_sampling_agrees_with_vllms_kernel_on_the_same_uniforms(runs):
    same = runs["on"]["same_uniforms"]
    assert same["batches"] == COUNTS["sampled_batches"]
    assert same["mismatched_requests"] == 0
    assert same["bonus_equal"] == same["bonus_total"] > 0
    # pinned: how many decisions and tokens were compared (corrections are drawn differently:
    # vLLM's exponential race on its generator, specreg's two-level race on its random stream
    # keyed by a 64-bit key per request drawn from that generator; both from the same residual)
    assert (same["decisions"], same["bonus_total"], same["corrections"]) == (168, 39, 76)


def test_sampling_with_min_p_and_logit_bias_is_lossless(runs):
    found = runs["on"]["lossless"]
    expected, scenarios = found["expected"], found["scenarios"]
    assert found["removed_by_min_p"], "the scenario needs a token min-p removes"
    for name in ("in_support", "removed_by_min_p"):
        scenario = scenarios[name]
        assert sum(scenario["first"]) == COUNTS["samples"]
        assert _pvalue(scenario["first"], expected["p0"]) > P_THRESHOLD, name
    in_support = scenarios["in_support"]
    assert sum(in_support["second_after_draft"]) > 4000
    assert _pvalue(in_support["second_after_draft"], expected["p1"]) > P_THRESHOLD
    # a draft min-p removed is never accepted, and never emitted
    assert sum(scenarios["removed_by_min_p"]["second_after_draft"]) == 0


def test_the_lossless_check_rejects_a_sampler_without_min_p_or_bias(runs):
    """Negative controls: the same counts against the distribution without the bias (or without
    min-p) fail, and the forward without min-p/bias state (an unpatched logits-processor seam)
    fails against the right distribution."""
    found = runs["on"]["lossless"]
    expected, scenarios = found["expected"], found["scenarios"]
    counts = scenarios["in_support"]["first"]
    with pytest.raises(AssertionError):  # token 2, of probability 0 without the bias, occurred
        _pvalue(counts, expected["p0_without_bias"])
    no_min_p = [max(p, 1e-12) for p in expected["p0_without_min_p"]]  # token 3 is never emitted
    assert float(chisquare(counts, [p / sum(no_min_p) * sum(counts) for p in no_min_p]
                           ).pvalue) < P_THRESHOLD
    control = scenarios["control_without_processors"]["first"]
    with pytest.raises(AssertionError):
        _pvalue(control, expected["p0"])
