"""Lossless checks on the toy model: greedy equality and a chi-square test of sampled tokens.

Greedy: speculative output must equal plain greedy decoding of the target token for token.
Sampling: the first and second generated tokens, over many independent samples, must follow the
target's exact marginals (computed by enumerating the vocabulary) by a chi-square test.
Mixed parameters: in one batch whose requests carry their own `SamplingParams`, the greedy
requests equal plain greedy decoding and each sampled kind's first tokens follow the exact
filtered, temperature-scaled target distribution.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import attrs
import torch

from specreg.testing.demo_params import MIXED_DEMO_KINDS, mixed_demo_params
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.registry.plan import SpecPlan
from specreg.contract.sampling_params import SamplingParams
from specreg.testing.loop import GenerationResult, SpeculativeLoop
from specreg.testing.toy_model import ToyLM, greedy_reference

P_VALUE_THRESHOLD = 1e-3


@attrs.frozen
class GreedyCheck:
    passed: bool
    first_mismatch: int | None
    result: GenerationResult


@attrs.frozen
class SamplingCheck:
    passed: bool
    p_values: tuple[float, ...]
    samples: int
    result: GenerationResult


def chi_square_p_value(observed: torch.Tensor, expected_probs: torch.Tensor) -> float:
    """Goodness of fit of counts to probabilities; bins expected below 5 are pooled."""
    observed = observed.double()
    n = float(observed.sum())
    expected = expected_probs.double() * n
    small = expected < 5
    if bool(small.any()):
        pooled_obs = observed[small].sum()
        pooled_exp = expected[small].sum()
        observed = torch.cat([observed[~small], pooled_obs[None]])
        expected = torch.cat([expected[~small], pooled_exp[None]])
        if float(pooled_exp) == 0.0:
            if float(pooled_obs) > 0:
                return 0.0  # a token of zero probability was produced
            observed, expected = observed[:-1], expected[:-1]
    df = observed.numel() - 1
    if df < 1:
        return 1.0
    stat = float(((observed - expected) ** 2 / expected).sum())
    return float(torch.special.gammaincc(torch.tensor(df / 2.0), torch.tensor(stat / 2.0)))


def check_greedy(
    plan: SpecPlan,
    target: ToyLM,
    draft: ToyLM,
    prompts: torch.Tensor,
    num_new: int,
    **loop_kwargs: Any,
) -> GreedyCheck:
    reference = greedy_reference(target, prompts, num_new)
    result = SpeculativeLoop(plan, target, draft, **loop_kwargs).generate(prompts, num_new)
    same = reference == result.tokens
    mismatch = None if bool(same.all()) else int((~same).any(0).nonzero()[0])
    return GreedyCheck(mismatch is None, mismatch, result)


def target_marginals(target: ToyLM, prompt: torch.Tensor, temperature: float) -> tuple[torch.Tensor, torch.Tensor]:
    """Exact distributions of the first and second generated tokens after `prompt` [L]."""
    v = target.config.vocab_size
    length = prompt.numel()
    seqs = torch.zeros(v + 1, length + 1, dtype=torch.long)
    seqs[:, :length] = prompt
    first = torch.softmax(
        target.next_logits(seqs[:1], torch.tensor([length])).double() / temperature, -1
    )[0]
    seqs[1:, length] = torch.arange(v)
    given = torch.softmax(
        target.next_logits(seqs[1:], torch.full((v,), length + 1)).double() / temperature, -1
    )
    second = (first[:, None] * given).sum(0)
    return first, second


def check_sampling(
    plan: SpecPlan,
    target: ToyLM,
    draft: ToyLM,
    prompt: torch.Tensor,
    *,
    samples: int = 4000,
    temperature: float = 1.0,
    seed: int = 0,
    **loop_kwargs: Any,
) -> SamplingCheck:
    """Chi-square tests of the first two sampled tokens against the target's marginals."""
    prompts = prompt[None, :].expand(samples, -1).clone()
    loop = SpeculativeLoop(
        plan, target, draft, sampling=True, temperature=temperature, seed=seed, **loop_kwargs
    )
    result = loop.generate(prompts, 2)
    first, second = target_marginals(target, prompt, temperature)
    v = target.config.vocab_size
    length = prompt.numel()
    p_values = []
    for column, probs in ((length, first), (length + 1, second)):
        counts = torch.bincount(result.tokens[:, column], minlength=v)
        p_values.append(chi_square_p_value(counts, probs))
    passed = all(p > P_VALUE_THRESHOLD for p in p_values)
    return SamplingCheck(passed, tuple(p_values), samples, result)


#: Exact distribution of one request's next token: (target logits [V], its parameters) -> [V].
Marginal = Callable[..., torch.Tensor]


@attrs.frozen
class MixedParamsCheck:
    """Greedy equality of the greedy requests and one chi-square p-value per sampled kind."""

    greedy_passed: bool
    first_mismatch: int | None
    kinds: tuple[str, ...]
    p_values: tuple[float, ...]
    result: GenerationResult

    @property
    def sampling_passed(self) -> bool:
        return all(p > P_VALUE_THRESHOLD for p in self.p_values)

    @property
    def passed(self) -> bool:
        return self.greedy_passed and self.sampling_passed


def params_label(params: SamplingParams, row: int) -> str:
    """A request's parameters in words, e.g. "T=0.8 top_p=0.9" (only those that filter)."""
    t = float(params.temperature[row])
    parts = [f"T={t:g}"]
    if int(params.top_k[row]) > 0:
        parts.append(f"top_k={int(params.top_k[row])}")
    if float(params.top_p[row]) < 1:
        parts.append(f"top_p={float(params.top_p[row]):g}")
    if float(params.min_p[row]) > 0:
        parts.append(f"min_p={float(params.min_p[row]):g}")
    return " ".join(parts)


def check_mixed_params(
    plan: SpecPlan,
    target: ToyLM,
    draft: ToyLM,
    prompts: torch.Tensor,
    num_new: int,
    *,
    samples: int = 4000,
    seed: int = 0,
    marginal: Marginal = filtered_distribution,
    **loop_kwargs: Any,
) -> MixedParamsCheck:
    """Two runs of batches mixing greedy and sampled requests (`mixed_demo_params`, seeds
    shifted by `seed`): every prompt of `prompts` [P, L] under every kind for `num_new` tokens,
    whose greedy requests must equal plain greedy decoding; then `samples` copies of
    `prompts[0]` for one token, whose first tokens per sampled kind must follow `marginal`
    (default: the exact filtered, temperature-scaled target) by chi-square."""
    kinds = len(MIXED_DEMO_KINDS)
    batch = prompts.repeat_interleave(kinds, 0)  # request r: prompt r // kinds, kind r % kinds
    params = _seeded(mixed_demo_params(batch.shape[0]), seed, 0)
    result = SpeculativeLoop(plan, target, draft, params=params, **loop_kwargs).generate(
        batch, num_new
    )
    greedy = params.greedy
    reference = greedy_reference(target, batch[greedy], num_new)
    same = reference == result.tokens[greedy]
    mismatch = None if bool(same.all()) else int((~same).any(0).nonzero()[0])

    prompt = prompts[0]
    many = _seeded(mixed_demo_params(samples), seed, batch.shape[0])
    sampled = SpeculativeLoop(plan, target, draft, params=many, **loop_kwargs).generate(
        prompt[None, :].expand(samples, -1).clone(), 1
    )
    length = prompt.numel()
    first = sampled.tokens[:, length]
    logits = target.next_logits(prompt[None, :], torch.tensor([length]))[0]
    labels, p_values = [], []
    for kind in range(kinds):
        rows = torch.arange(kind, samples, kinds)
        row = int(rows[0])
        if bool(many.greedy[row]):  # greedy requests: the target's argmax, every one of them
            if not bool((first[rows] == int(logits.argmax())).all()):
                mismatch = length if mismatch is None else mismatch
            continue
        expected = marginal(
            logits, temperature=float(many.temperature[row]), top_k=int(many.top_k[row]),
            top_p=float(many.top_p[row]), min_p=float(many.min_p[row]),
        )
        counts = torch.bincount(first[rows], minlength=target.config.vocab_size)
        labels.append(params_label(many, row))
        p_values.append(chi_square_p_value(counts, expected))
    return MixedParamsCheck(mismatch is None, mismatch, tuple(labels), tuple(p_values), result)


def _seeded(params: SamplingParams, seed: int, start: int) -> SamplingParams:
    """`params` with request r seeded by (seed, start + r), distinct across the two runs."""
    b = params.batch_size
    return attrs.evolve(params, seed=seed * 1_000_003 + start + torch.arange(b))
