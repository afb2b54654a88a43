"""Lossless checks on the toy model: greedy equality and a chi-square test of sampled tokens.

Greedy: speculative output must equal plain greedy decoding of the target token for token.
Sampling: the first and second generated tokens, over many independent samples, must follow the
target's exact marginals (computed by enumerating the vocabulary) by a chi-square test.
"""

from __future__ import annotations

from typing import Any

import attrs
import torch

from specreg.plan import SpecPlan
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
