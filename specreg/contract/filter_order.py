"""The filter orders (`FilterOrder`): how top-k, top-p and min-p combine, stated once per order.

Imports neither torch nor triton: `specreg.contract.config` validates `SpecConfig.filter_order` with it.

Each of the three filters keeps an upper set of the filter keys (the scaled scores z, temperature
applied, for logits; the probabilities themselves for probability inputs), and every order keeps the intersection of the top-k, top-p and min-p sets. The orders differ only in
the set whose renormalised mass top-p measures, and in whether a token exactly at the top-p
boundary is kept (`FilterRule`):

| order | top-p measures the mass of | keeps a token when the mass above it | whose sampler |
| --- | --- | --- | --- |
| `specreg` (default) | the top-k survivors | < p | specreg's own (top-k, top-p, then min-p) |
| `vllm` | the survivors of min-p and top-k | < p | vLLM 0.33: min-p logits processor, then `apply_top_k_top_p` |
| `sglang` | the whole distribution | <= p | SGLang 0.5.23: `top_k_top_p_min_p_sampling_from_probs_torch` |

In all three: top-k keeps key >= the k-th largest key (ties at the cut all kept); min-p keeps a
token whose probability is >= min_p times the largest (scale-free, so renormalising before or
after does not change it); the mass above a token is that of the tokens with a strictly larger
key (ties at the top-p boundary all kept). Where the frameworks sort instead, ties are not
well-defined there: SGLang's top-k keeps exactly k tokens by sort position, and both
frameworks' top-p keep the tied tokens their sort happens to put first.
"""

from __future__ import annotations

from typing import Literal

import attrs

from specreg.errors import Problem, problem

FilterOrder = Literal["specreg", "vllm", "sglang"]

#: The order used when none is chosen (`SpecConfig.filter_order` unset, kernels' default).
DEFAULT_FILTER_ORDER: FilterOrder = "specreg"


@attrs.frozen
class FilterRule:
    """One order's rule: `top_p_over` names the set whose renormalised mass top-p measures
    ('top_k', 'top_k_min_p' or 'all'); `keeps_top_p_boundary` keeps a token whose mass above is
    exactly p; `code` is the order's number in the Triton kernels (a constexpr)."""

    name: FilterOrder
    top_p_over: Literal["top_k", "top_k_min_p", "all"]
    keeps_top_p_boundary: bool
    code: int


FILTER_RULES: dict[str, FilterRule] = {
    "specreg": FilterRule("specreg", "top_k", False, 0),
    "vllm": FilterRule("vllm", "top_k_min_p", False, 1),
    "sglang": FilterRule("sglang", "all", True, 2),
}

FILTER_ORDERS: tuple[str, ...] = tuple(FILTER_RULES)


def order_problem(value: object, *, field: str, fix: str) -> Problem | None:
    """SR130 when `value` is not a filter order, else None."""
    if isinstance(value, str) and value in FILTER_RULES:
        return None
    return problem(
        "SR130",
        f"{field}={value!r} is not a filter order",
        accepted=", ".join(FILTER_ORDERS) + f" (default {DEFAULT_FILTER_ORDER})",
        fix=fix,
        field=field,
    )


def filter_rule(order: object) -> FilterRule:
    """The rule of `order` (a kernel argument); SR130 as a `KernelInputError` otherwise."""
    if isinstance(order, str) and order in FILTER_RULES:
        return FILTER_RULES[order]
    from specreg.errors import KernelInputError

    found = order_problem(
        order, field="filter_order",
        fix="pass filter_order='specreg', 'vllm' or 'sglang' (the plan's config.filter_order)",
    )
    assert found is not None
    raise KernelInputError(found)
