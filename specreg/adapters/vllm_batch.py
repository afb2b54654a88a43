"""vLLM's rejection-sampler batch in specreg's chain layout, and back (the `rejection_sampler`
substitution's translation, `specreg.adapters.vllm_rejection`).

vLLM hands its rejection sampler flat rows: per request its draft positions' target rows, then
its bonus row (`SpecDecodeMetadata`), and per-request state in `SamplingMetadata` and its
logits processors. specreg's `ChainVerifier` takes candidates [b, n], scores [b, n, V],
`SamplingParams` and coins. Only imported inside a vLLM process.
"""

from __future__ import annotations

from typing import Any


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

    from specreg.contract.sampling_params import SamplingParams

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
    would use, per-request generators included) as [b, n-1], and one key per request on
    specreg's random stream for the correction token (64 bits from the request's generator when
    it is seeded, else from torch's default one: the correction race reads one independent
    value per token, never a function of one float coin); zeros, drawing nothing, when every
    request is greedy (vLLM draws none then either)."""
    import torch
    from vllm.v1.sample.rejection_sampler import generate_uniform_probs

    from specreg.kernels.random_stream import fresh_keys

    b, n = layout.b, layout.n
    coins = torch.zeros((b * n,), dtype=torch.float64, device=device)
    keys = torch.zeros((b,), dtype=torch.int64, device=device)
    if all_greedy:
        return coins.view(b, n)[:, : n - 1], keys
    flat = generate_uniform_probs(layout.request.shape[0], num_draft_tokens, generators, device)
    coins[layout.target_rows] = flat
    keys = fresh_keys(b, device)
    for i, generator in generators.items():
        if num_draft_tokens[i] > 0:
            keys[i : i + 1] = fresh_keys(1, device, generator=generator)
    return coins.view(b, n)[:, : n - 1], keys


def verify(verifier: Any, metadata: Any, layout: ChainLayout, scores: Any,
           bonus_token_ids: Any, sm: Any) -> tuple[Any, Any]:
    """vLLM's output_token_ids int32 [b, max_spec_len + 1] (-1 padded) and the params used: the
    chain verified by `verifier` on `scores` [b, n, V], vLLM's bonus token where every draft
    was accepted."""
    import torch

    candidates, verify_lens = chain_candidates(layout, metadata.draft_token_ids)
    params = request_params(sm, layout.b, scores.shape[-1], scores.device)
    coins, keys = vllm_coins(layout, metadata.num_draft_tokens, sm.generators, sm.all_greedy,
                             scores.device)
    found = verifier.verify_from_logits(
        candidates, scores, None, params=params, coins=coins, keys=keys,
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
