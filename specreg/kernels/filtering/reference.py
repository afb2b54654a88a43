"""Plain per-row reference of the filtering rule (the test oracle): sort, cut, renormalise."""

from __future__ import annotations

import math
import struct

import torch

from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, FilterOrder, filter_rule


def _f32(value: float) -> float:
    """`value` rounded to float32 (as torch's float32 difference z - max z is)."""
    return struct.unpack("f", struct.pack("f", value))[0]


def filtered_distribution(
    scores: torch.Tensor,
    *,
    temperature: float,
    top_k: int = 0,
    top_p: float = 1.0,
    min_p: float = 0.0,
    probabilities: bool = False,
    order: FilterOrder = DEFAULT_FILTER_ORDER,
) -> torch.Tensor:
    """The filtered, temperature-scaled distribution of one row `scores` [V] as float64 [V].

    Follows the rule in `specreg.kernels.filtering` step by step with a full sort, top-p
    measured as `order` says (`specreg.contract.filter_order`): the filters rank the keys
    (z = s / T for logits, the float32 probabilities for probability inputs), the weights are
    exp(z - max z) in float64 (0 where the float32 difference is <= the exp floor, as on every
    backend); temperature 0 returns the one-hot of the argmax (lowest index on ties)."""
    # imported here: specreg.testing's pytest plugin imports this module before the tests
    # switch Triton's interpreter on, and the sampling family imports Triton
    from specreg.kernels.exp_log import EXP_FLOOR

    rule = filter_rule(order)
    s = scores.to(torch.float32)
    key = torch.where(s > 0, s, float("-inf"))  # probabilities: p itself (0: masked, as log 0)
    if probabilities:
        s = torch.log(s)
    vocab = s.shape[0]
    if temperature == 0:
        out = torch.zeros(vocab, dtype=torch.float64)
        out[int(torch.argmax(s))] = 1.0
        return out
    z = s / torch.tensor(temperature, dtype=torch.float32)
    if not probabilities:
        key = z
    ordered = sorted(range(vocab), key=lambda v: -float(key[v]))
    everything = torch.ones(vocab, dtype=torch.bool)
    top_k_keep = everything
    if 0 < top_k < vocab:
        top_k_keep = key >= key[ordered[top_k - 1]]
    shift = float(z[max(range(vocab), key=lambda v: float(key[v]))])  # z of the largest key

    def weight_of(v: int) -> float:
        x = float(z[v]) - shift
        return 0.0 if x < 2 * EXP_FLOOR or _f32(x) <= EXP_FLOOR else math.exp(x)

    weight = [weight_of(v) for v in range(vocab)]
    min_p_keep = torch.tensor([w >= min_p for w in weight]) if min_p > 0 else everything
    base = {
        "top_k": top_k_keep, "top_k_min_p": top_k_keep & min_p_keep, "all": everything,
    }[rule.top_p_over]
    top_p_keep = everything
    if top_p < 1:
        total = sum(weight[v] for v in range(vocab) if base[v])
        goal = top_p * total
        above = 0.0
        for position, v in enumerate(ordered):
            if not base[v]:
                continue
            tied_before = position > 0 and float(key[ordered[position - 1]]) == float(key[v])
            past = above > goal if rule.keeps_top_p_boundary else above >= goal
            if not tied_before and past:
                top_p_keep = key > key[v]
                break
            above += weight[v]
    keep = top_k_keep & top_p_keep & min_p_keep
    kept = torch.tensor([weight[v] if keep[v] else 0.0 for v in range(vocab)], dtype=torch.float64)
    return kept / kept.sum()
