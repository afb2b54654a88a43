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

    class SpecregRejectionSampler(base):  # type: ignore[misc, valid-type]
        """vLLM's `RejectionSampler` verifying with specreg's `ChainVerifier` (module doc)."""

        __specreg_substitution__ = True

        def __init__(self, sampler: Any, spec_config: Any = None, device: Any = None,
                     **kwargs: Any) -> None:
            _check_spec_config(spec_config)
            super().__init__(sampler, spec_config, device, **kwargs)
            from specreg.chain_verifier import ChainVerifier

            k = int(spec_config.num_speculative_tokens) if spec_config is not None else None
            widest = min(k, MAX_SPEC_LEN) if k else MAX_SPEC_LEN
            self.verifier = ChainVerifier(
                widest + 1, widths=range(1, widest + 2), filter_order="vllm"
            )

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
            layout = ChainLayout.of(metadata, logits.device)
            raw_target = target = None
            processing = needs_processing(sm)
            if sm.max_num_logprobs is not None or processing:
                raw_target = logits[metadata.target_logits_indices].to(torch.float32)
                target = raw_target if self.is_processed_logprobs_mode else raw_target.clone()
            if processing:
                add_logit_bias(target, sm, layout)
                target = self.apply_logits_processors(target, sm, metadata)
            scores = chain_scores(layout, logits, metadata, target if processing else None)
            output, params = verify(self.verifier, metadata, layout, scores,
                                    bonus.sampled_token_ids, sm)
            logprobs = None
            if sm.max_num_logprobs is not None:
                shown = (processed_logits(target, layout, params, sm)
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


class ChainLayout:
    """Where vLLM's flat rows go in specreg's [b, n, V] chain layout (n = max_spec_len + 1):
    request r's draft j is flat target row `start[r] + j`, verified at slot j of row r; its
    bonus row is slot `counts[r]`."""

    def __init__(self, counts: Any, max_spec_len: int, *, uniform: bool = False) -> None:
        import torch

        self.counts = counts  # int64 [b] on the device
        self.b = int(counts.shape[0])
        self.n = int(max_spec_len) + 1
        device = counts.device
        starts = torch.cumsum(counts, 0) - counts
        self.request = torch.repeat_interleave(torch.arange(self.b, device=device), counts)
        self.slot = torch.arange(self.request.shape[0], device=device) - starts[self.request]
        self.target_rows = self.request * self.n + self.slot  # flat index into [b * n]
        self.bonus_rows = torch.arange(self.b, device=device) * self.n + counts
        self.uniform = uniform

    @classmethod
    def of(cls, metadata: Any, device: Any) -> ChainLayout:
        import torch

        counts = metadata.num_draft_tokens  # a host list: no device sync
        return cls(torch.tensor(counts, dtype=torch.int64).to(device), metadata.max_spec_len,
                   uniform=min(counts) == metadata.max_spec_len)


def add_logit_bias(target: Any, sm: Any, layout: ChainLayout) -> None:
    """Each request's logit bias (vLLM's `LogitBiasLogitsProcessor` state) added to its target
    rows in place."""
    import torch
    from vllm.v1.sample.logits_processor import LogitBiasLogitsProcessor

    proc = _processor(sm, LogitBiasLogitsProcessor)
    if proc is None or not proc.biases:
        return
    reqs, toks = (t.to(target.device, torch.int64) for t in proc.logits_slice)
    values = proc.bias_tensor.to(target.device, target.dtype)
    per_entry = layout.counts[reqs]
    entry = torch.repeat_interleave(torch.arange(reqs.shape[0], device=target.device), per_entry)
    first = torch.cumsum(per_entry, 0) - per_entry
    slot = torch.arange(entry.shape[0], device=target.device) - first[entry]
    starts = torch.cumsum(layout.counts, 0) - layout.counts
    rows = starts[reqs[entry]] + slot
    target.index_put_((rows, toks[entry]), values[entry], accumulate=True)


def request_min_p(sm: Any, b: int, device: Any) -> Any:
    """float32 [b]: each request's min_p (vLLM's `MinPLogitsProcessor` state; 0 without it)."""
    import torch
    from vllm.v1.sample.logits_processor import MinPLogitsProcessor

    proc = _processor(sm, MinPLogitsProcessor)
    if proc is None or not proc.min_p_count:
        return torch.zeros(b, dtype=torch.float32, device=device)
    return torch.from_numpy(proc.min_p_cpu[:b].copy()).to(device)


def _processor(sm: Any, kind: type) -> Any:
    return next((p for p in sm.logitsprocs.all if isinstance(p, kind)), None)


def request_params(sm: Any, b: int, vocab: int, device: Any) -> Any:
    """specreg's `SamplingParams` of vLLM's batch (temperature 0: greedy; top_k V: off)."""
    import torch

    from specreg.sampling_params import SamplingParams

    if sm.all_greedy or sm.temperature is None:
        temperature = torch.zeros(b, dtype=torch.float32, device=device)
    else:
        temperature = sm.temperature[:b]
    return SamplingParams.of(
        b, temperature=temperature,
        top_k=0 if sm.top_k is None else sm.top_k[:b],
        top_p=1.0 if sm.top_p is None else sm.top_p[:b],
        min_p=request_min_p(sm, b, device), device=device,
    )


def needs_processing(sm: Any) -> bool:
    """Whether vLLM's logits processing of the target rows (`apply_logits_processors`) or a
    logit bias would change them: otherwise the substitution reads vLLM's logits in place."""
    from vllm.v1.sample.logits_processor import LogitBiasLogitsProcessor, MinTokensLogitsProcessor

    if not sm.no_penalties or sm.bad_words_token_ids or sm.allowed_token_ids_mask is not None:
        return True
    holder = sm.thinking_budget_state_holder
    if holder is not None and holder.has_tracked_requests():
        return True
    return any(isinstance(p, MinTokensLogitsProcessor) and p.min_toks
               or isinstance(p, LogitBiasLogitsProcessor) and p.biases
               for p in sm.logitsprocs.non_argmax_invariant)


def chain_scores(layout: ChainLayout, logits: Any, metadata: Any, target: Any) -> Any:
    """The target scores in specreg's [b, n, V] layout: each request's verified rows (`target`,
    processed, or vLLM's raw rows when `target` is None), then its bonus-position row, vLLM's raw
    row (read only when every draft is accepted, and vLLM's own bonus token is emitted then);
    slots past it are never read. vLLM's runner lays out each request's rows contiguously (its
    targets, then its bonus), so when every request has max_spec_len drafts and nothing was
    processed this is a view of vLLM's logits: no copy."""
    b, n = layout.b, layout.n
    if target is None and layout.uniform and logits.shape[0] == b * n:
        return logits.view(b, n, logits.shape[-1])
    if target is None:
        target = logits[metadata.target_logits_indices]
    scores = target.new_empty((b * n, target.shape[-1]))
    scores.index_copy_(0, layout.target_rows, target)
    bonus = logits[metadata.bonus_logits_indices]
    scores.index_copy_(0, layout.bonus_rows, bonus.to(scores.dtype))
    return scores.view(b, n, -1)


def chain_candidates(layout: ChainLayout, draft_token_ids: Any) -> tuple[Any, Any]:
    """candidates int64 [b, n] (a placeholder root 0, then the drafts, -1 padded) and
    verify_lens [b]: 1 + the leading drafts that are real (vLLM pads a position it wants
    rejected with draft id -1)."""
    import torch

    b, n = layout.b, layout.n
    device = draft_token_ids.device
    candidates = torch.full((b * n,), -1, dtype=torch.int64, device=device)
    candidates[layout.target_rows + 1] = draft_token_ids.to(torch.int64)
    candidates = candidates.view(b, n)
    candidates[:, 0] = 0
    drafts = candidates[:, 1:]
    real = (drafts >= 0) & (torch.arange(n - 1, device=device) < layout.counts[:, None])
    verify_lens = 1 + torch.cumprod(real.to(torch.int64), dim=1).sum(1)
    return candidates, verify_lens


def vllm_coins(layout: ChainLayout, num_draft_tokens: list[int], generators: dict,
                  all_greedy: bool, device: Any) -> tuple[Any, Any]:
    """The acceptance coins (vLLM's own `generate_uniform_probs`: the uniforms vLLM's kernel
    would use, per-request generators included) as [b, n-1], and one final coin per request
    (its generator's next draw) for the correction token; zeros, drawing nothing, when every
    request is greedy (vLLM draws none then either)."""
    import torch
    from vllm.v1.sample.rejection_sampler import generate_uniform_probs

    b, n = layout.b, layout.n
    coins = torch.zeros((b * n,), dtype=torch.float64, device=device)
    final = torch.zeros((b,), dtype=torch.float64, device=device)
    if all_greedy:
        return coins.view(b, n)[:, : n - 1], final
    flat = generate_uniform_probs(layout.request.shape[0], num_draft_tokens, generators, device)
    coins[layout.target_rows] = flat
    final.uniform_()
    for i, generator in generators.items():
        if num_draft_tokens[i] > 0:
            final[i : i + 1].uniform_(generator=generator)
    return coins.view(b, n)[:, : n - 1], final


def verify(verifier: Any, metadata: Any, layout: ChainLayout, scores: Any,
           bonus_token_ids: Any, sm: Any) -> tuple[Any, Any]:
    """vLLM's output_token_ids int32 [b, max_spec_len + 1] (-1 padded) and the params used: the
    chain verified by `verifier` on `scores` [b, n, V], vLLM's bonus token where every draft
    was accepted."""
    import torch

    candidates, verify_lens = chain_candidates(layout, metadata.draft_token_ids)
    params = request_params(sm, layout.b, scores.shape[-1], scores.device)
    coins, final = vllm_coins(layout, metadata.num_draft_tokens, sm.generators, sm.all_greedy,
                              scores.device)
    found = verifier.verify_from_logits(
        candidates, scores, None, params=params, coins=coins, final_coins=final,
        verify_lens=verify_lens,
    )
    out = found.output_tokens
    every = found.num_accepted.to(torch.int64) == layout.counts
    column = torch.arange(layout.n, device=out.device)[None, :]
    out = torch.where(every[:, None] & (column == layout.counts[:, None]),
                      bonus_token_ids.to(out.dtype).view(-1, 1), out)
    return out.to(torch.int32), params


def processed_logits(target: Any, layout: ChainLayout, params: Any, sm: Any) -> Any:
    """The target logits as vLLM's processed logprobs modes report them, for logprobs only:
    unchanged when every request is greedy, else temperature (greedy rows unscaled), min-p
    (sampled rows), then vLLM's top-k/top-p (vLLM's sampler's order)."""
    import torch
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p

    if sm.all_greedy:
        return target
    temperature = params.temperature[layout.request]
    greedy = temperature == 0
    scaled = target / torch.where(greedy, 1.0, temperature).unsqueeze(-1)
    min_p = torch.where(greedy, 0.0, params.min_p[layout.request])
    if bool((min_p > 0).any()):
        probs = scaled.softmax(-1)
        scaled = scaled.masked_fill(probs < probs.amax(-1, keepdim=True) * min_p[:, None],
                                    float("-inf"))
    top_k = None if sm.top_k is None else sm.top_k[layout.request]
    top_p = None if sm.top_p is None else sm.top_p[layout.request]
    return apply_top_k_top_p(scaled, top_k, top_p)
