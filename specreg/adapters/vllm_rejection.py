"""vLLM's rejection sampler on specreg's chain verifier: the `rejection_sampler` substitution.

`install(plan)` runs inside every vLLM process whose adapter switch asks for it
(`SPECREG_VLLM=enforce SPECREG_VLLM_SUBSTITUTE=rejection_sampler`) and patches three seams of
vLLM 0.33's V1 model runner, checking each took effect (SR182 otherwise):

- `vllm.v1.worker.gpu_model_runner.RejectionSampler`, the class the runner builds, becomes
  `SpecregRejectionSampler`: its `forward` keeps vLLM's bonus-token sampler and vLLM's own
  logits processing of the target positions (penalties, allowed tokens, bad words, min tokens,
  thinking budget: `RejectionSampler.apply_logits_processors`), adds each request's logit bias
  (before those processors, the plain sampler's order) and verifies every draft with
  `ChainVerifier.verify_from_logits` under the request's temperature, top-k, top-p and min-p
  (filter order `vllm`). It never launches vLLM's rejection kernels.
- `gpu_model_runner.build_logitsprocs` builds vLLM's built-in min-p and logit-bias processors
  with speculative decoding too (vLLM builds only min-tokens there), so each request's values
  reach the batch state and vLLM's sampler applies them to the bonus token.
- `vllm.sampling_params.SamplingParams._validate_spec_decode` no longer refuses `min_p` and
  `logit_bias` (every other check it makes still runs).

Which one wins against the platform's kernel overrides: vLLM loads general plugins in
`init_worker`, then calls `current_platform.register_triton_kernel_overrides()`, which rebinds
vLLM's Triton kernels (`vllm.triton_utils.dispatcher.register_kernels`; a second registration of
a name overwrites the first). A kernel-level substitution would lose to the platform; this one
replaces the sampler above the kernels, so specreg's verifier runs whatever the platform
registers, and the platform's overrides still serve vLLM's other kernels.

Not covered, refused with SR188 when vLLM builds the sampler: the V2 model runner (its own
`RejectionSampler`), `rejection_sample_method` other than 'standard' (synthetic, block, FLy) and
`draft_sample_method='probabilistic'` (draft probabilities that specreg's rule would re-filter).
The translation between vLLM's batch and specreg's chain layout is `specreg.adapters.vllm_batch`.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from typing import Any

from specreg.adapters.substitution_runtime import require_applied, seam_missing
from specreg.errors import PluginError, problem

NAME = "rejection_sampler"
RUNNER = "vllm.v1.worker.gpu_model_runner"
RUNNER_V2 = "vllm.v1.worker.gpu.model_runner"
SEAMS = {
    "sampler": f"{RUNNER}.RejectionSampler",
    "sampler_v2": f"{RUNNER_V2}.RejectionSampler",
    "logitsprocs": f"{RUNNER}.build_logitsprocs",
    "validation": "vllm.sampling_params.SamplingParams._validate_spec_decode",
}
_SAMPLING_EPS = 1e-5  # vLLM's threshold for "min_p is set"


def _unsupported(why: str, accepted: str, fix: str) -> PluginError:
    return PluginError(problem(
        "SR188", f"vLLM's rejection sampler cannot run on specreg's chain verifier here: {why}",
        accepted=accepted,
        fix=f"{fix}, or unset SPECREG_VLLM_SUBSTITUTE to run vLLM's own rejection sampler",
        field="SPECREG_VLLM_SUBSTITUTE",
    ))


# ----------------------------------------------------------------------------------- install
def install(plan: Any = None) -> None:
    """Patch the three seams (module docstring) and check each; SR182 when one is missing or did
    not take. `plan` is unused: every width and parameter comes from vLLM's own objects."""
    del plan
    try:
        from vllm.sampling_params import SamplingParams
        from vllm.v1.sample import rejection_sampler
        from vllm.v1.sample.logits_processor import (
            BUILTIN_LOGITS_PROCESSORS,
            LogitBiasLogitsProcessor,
            LogitsProcessors,
            MinPLogitsProcessor,
        )
        from vllm.v1.worker import gpu_model_runner
    except (ImportError, AttributeError) as exc:
        raise seam_missing("vllm", SEAMS["sampler"], exc) from exc
    for key, host, attr in (
        ("sampler", gpu_model_runner, "RejectionSampler"),
        ("logitsprocs", gpu_model_runner, "build_logitsprocs"),
        ("validation", SamplingParams, "_validate_spec_decode"),
    ):
        if not hasattr(host, attr):
            raise seam_missing("vllm", SEAMS[key])
    if getattr(gpu_model_runner.RejectionSampler, "__specreg_substitution__", False):
        return  # installed already in this process
    if gpu_model_runner.RejectionSampler is not rejection_sampler.RejectionSampler:
        raise seam_missing("vllm", SEAMS["sampler"] + " (not vLLM's own RejectionSampler)")
    del LogitBiasLogitsProcessor, MinPLogitsProcessor  # imported to check the seam exists

    sampler_class = _sampler_class(rejection_sampler.RejectionSampler)
    logitsprocs = _build_logitsprocs(
        gpu_model_runner.build_logitsprocs, LogitsProcessors, tuple(BUILTIN_LOGITS_PROCESSORS)
    )
    validate = _validate_spec_decode(SamplingParams._validate_spec_decode)
    gpu_model_runner.RejectionSampler = sampler_class
    gpu_model_runner.build_logitsprocs = logitsprocs
    SamplingParams._validate_spec_decode = validate
    require_applied("vllm", SEAMS["sampler"], gpu_model_runner.RejectionSampler, sampler_class)
    require_applied("vllm", SEAMS["logitsprocs"], gpu_model_runner.build_logitsprocs,
                    logitsprocs)
    require_applied("vllm", SEAMS["validation"], SamplingParams._validate_spec_decode, validate)
    _refuse_v2_runner()


def _refuse_v2_runner() -> None:
    """The V2 model runner builds its own sampler: refuse it at construction (SR188) rather than
    let it run vLLM's kernels while the user asked for specreg's."""
    try:
        from vllm.v1.worker.gpu import model_runner as v2
    except ImportError:
        return  # no V2 runner in this build: nothing can bypass the substitution there
    original = getattr(v2, "RejectionSampler", None)
    if original is None:
        raise seam_missing("vllm", SEAMS["sampler_v2"])

    class RefusedRejectionSampler(original):  # type: ignore[misc, valid-type]
        __specreg_substitution__ = True

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            raise _unsupported(
                "vLLM chose its V2 model runner, whose rejection sampler the substitution does "
                "not replace", accepted="the V1 model runner",
                fix="export VLLM_USE_V2_MODEL_RUNNER=0")

    v2.RejectionSampler = RefusedRejectionSampler
    require_applied("vllm", SEAMS["sampler_v2"], v2.RejectionSampler, RefusedRejectionSampler)


def _validate_spec_decode(original: Any) -> Any:
    """vLLM's check without its min_p / logit_bias refusal: the check runs on a copy of the
    parameters with those two cleared, so anything else it refuses is still refused."""

    def _validate_spec_decode(params: Any, speculative_config: Any) -> None:
        if speculative_config is None or not (params.min_p > _SAMPLING_EPS or params.logit_bias):
            return original(params, speculative_config)
        cleared = copy.copy(params)
        cleared.min_p = 0.0
        cleared.logit_bias = None
        return original(cleared, speculative_config)

    _validate_spec_decode.__specreg_substitution__ = True  # type: ignore[attr-defined]
    _validate_spec_decode.__wrapped__ = original  # type: ignore[attr-defined]
    return _validate_spec_decode


def _build_logitsprocs(original: Any, logits_processors: type, builtins: tuple[type, ...]) -> Any:
    """vLLM's `build_logitsprocs`, with its built-ins (min-tokens, logit-bias, min-p) under
    speculative decoding as well; custom processors stay refused there, as vLLM refuses them."""

    def build_logitsprocs(vllm_config: Any, device: Any, is_pin_memory: bool,
                          is_pooling_model: bool, custom_logitsprocs: Any = ()) -> Any:
        if is_pooling_model or not vllm_config.speculative_config or custom_logitsprocs:
            return original(vllm_config, device, is_pin_memory, is_pooling_model,
                            custom_logitsprocs)
        return logits_processors(ctor(vllm_config, device, is_pin_memory) for ctor in builtins)

    build_logitsprocs.__specreg_substitution__ = True  # type: ignore[attr-defined]
    build_logitsprocs.__wrapped__ = original  # type: ignore[attr-defined]
    return build_logitsprocs


# ------------------------------------------------------------------------------ the sampler
def _sampler_class(base: type) -> type:
    """`SpecregRejectionSampler`, a subclass of vLLM's `RejectionSampler` (built here because
    vLLM is only importable inside its own process)."""
    from vllm.v1.outputs import SamplerOutput
    from vllm.v1.sample.rejection_sampler import MAX_SPEC_LEN

    from specreg.adapters import vllm_batch as batch

    class SpecregRejectionSampler(base):  # type: ignore[misc, valid-type]
        """vLLM's `RejectionSampler` verifying with specreg's `ChainVerifier` (module doc)."""

        __specreg_substitution__ = True

        def __init__(self, sampler: Any, spec_config: Any = None, device: Any = None,
                     **kwargs: Any) -> None:
            _check_spec_config(spec_config)
            super().__init__(sampler, spec_config, device, **kwargs)
            from specreg.step.chain_verifier import ChainVerifier

            k = int(spec_config.num_speculative_tokens) if spec_config is not None else None
            widest = min(k, MAX_SPEC_LEN) if k else MAX_SPEC_LEN
            self.verifier = ChainVerifier(
                widest + 1, widths=range(1, widest + 2), filter_order="vllm"
            )
            self.last_layout: tuple[Any, Any] = (None, None)  # (draft counts, device), layout

        def layout_of(self, metadata: Any, device: Any) -> Any:
            """The chain layout of this step's draft counts, rebuilt only when they change
            (consecutive decoding steps usually keep them)."""
            key = (tuple(metadata.num_draft_tokens), device)
            if self.last_layout[0] != key:
                self.last_layout = (key, batch.ChainLayout.of(metadata, device))
            return self.last_layout[1]

        def forward(self, metadata: Any, draft_probs: Any, logits: Any,
                    sampling_metadata: Any) -> Any:
            import torch

            if draft_probs is not None:
                raise _unsupported(
                    "the drafter passed draft probabilities", accepted="draft_probs None "
                    "(draft_sample_method 'greedy')", fix="set draft_sample_method 'greedy'")
            sm = sampling_metadata
            bonus_logits = logits[metadata.bonus_logits_indices]
            bonus = self.sampler(
                logits=bonus_logits, sampling_metadata=replace(sm, max_num_logprobs=-1),
                predict_bonus_token=True,
                logprobs_mode_override="processed_logits" if self.is_processed_logprobs_mode
                else "raw_logits",
            )
            layout = self.layout_of(metadata, logits.device)
            raw_target = target = None
            processing = batch.needs_processing(sm)
            if sm.max_num_logprobs is not None or processing:
                raw_target = logits[metadata.target_logits_indices].to(torch.float32)
                target = raw_target if self.is_processed_logprobs_mode else raw_target.clone()
            if processing:
                batch.add_logit_bias(target, sm, layout)
                target = self.apply_logits_processors(target, sm, metadata)
            scores = batch.chain_scores(layout, logits, metadata, target if processing else None)
            output, params = batch.verify(self.verifier, metadata, layout, scores,
                                          bonus.sampled_token_ids, sm)
            logprobs = None
            if sm.max_num_logprobs is not None:
                shown = (batch.processed_logits(target, layout, params, sm)
                         if self.is_processed_logprobs_mode else raw_target)
                logprobs = self._get_logprobs_tensors(
                    sm.max_num_logprobs, metadata, logits, shown,
                    bonus.logprobs_tensors.logprobs, output,
                )
            return SamplerOutput(sampled_token_ids=output, logprobs_tensors=logprobs)

    return SpecregRejectionSampler


def _check_spec_config(spec_config: Any) -> None:
    if spec_config is None:
        return
    method = getattr(spec_config, "rejection_sample_method", "standard")
    if method != "standard":
        raise _unsupported(
            f"rejection_sample_method={method!r}", accepted="rejection_sample_method 'standard'",
            fix="drop rejection_sample_method from the speculative config")
    drafting = getattr(spec_config, "draft_sample_method", "greedy")
    if drafting != "greedy":
        raise _unsupported(
            f"draft_sample_method={drafting!r} (the drafts' probabilities would be filtered "
            "again by the request's parameters)", accepted="draft_sample_method 'greedy'",
            fix="drop draft_sample_method from the speculative config")
