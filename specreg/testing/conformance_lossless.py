"""The conformance kit's generation clauses: what a plan generates equals plain decoding.

On specreg's toy models, greedy output through the plan must equal plain greedy decoding (at
the config and at every adaptive candidate's width) and sampled tokens must follow the target's
distribution. A mismatch is SR154, a coded error its own problems, and any other exception an
object raised (a shape that disagrees with the plan's widths) SR155, each a clause of the
report (`specreg.testing.conformance_report`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from functools import partial
from typing import Any

import torch

from specreg.errors import SpecRegError, problem
from specreg.contract.phase import Phase
from specreg.registry.plan import SpecPlan
from specreg.testing.conformance_report import ConformanceReport
from specreg.testing.lossless import check_greedy, check_sampling
from specreg.testing.toy_model import ToyConfig, ToyLM


def lossless_clauses(
    report: ConformanceReport, plans: list[tuple[Any, SpecPlan]],
    adaptive: list[tuple[Any, SpecPlan]], *, samples: int, seed: int,
) -> None:
    toy = ToyConfig()
    target = ToyLM(toy, seed=seed)
    draft = target.perturbed(0.25, seed=seed + 1)
    prompts = torch.randint(0, toy.vocab_size - 1, (3, 24), generator=torch.Generator().manual_seed(seed))
    for config, plan in adaptive[:1]:  # the verify at every candidate width, lossless
        if plan.num_tokens_per_req(Phase.TARGET_VERIFY) > toy.window:
            continue
        for candidate in plan.candidates:
            name = (f"greedy output at candidate step {candidate.steps} (verify width "
                    f"{candidate.sizes.verify_width}) equals plain greedy for {config}")
            generation_clause(report, name, plan, partial(
                _greedy, plan, target, draft, prompts, 16, candidate.steps))
    for config, plan in _spread(plans, 2):
        if plan.num_tokens_per_req(Phase.TARGET_VERIFY) > toy.window:
            continue
        generation_clause(report, f"greedy output equals plain greedy decoding for {config}",
                          plan, partial(_greedy, plan, target, draft, prompts, 24, None))
        generation_clause(
            report, f"sampled tokens follow the target distribution for {config}", plan,
            partial(_sampled, plan, target, draft, prompts[0], samples, seed),
        )


def _greedy(plan: SpecPlan, target: ToyLM, draft: ToyLM, prompts: Any, new: int,
            steps: int | None) -> str | None:
    checked = check_greedy(plan, target, draft, prompts, new, steps=steps)
    return None if checked.passed else (
        f"greedy output differs from plain greedy decoding from column {checked.first_mismatch}")


def _sampled(plan: SpecPlan, target: ToyLM, draft: ToyLM, prompt: Any, samples: int,
             seed: int) -> str | None:
    checked = check_sampling(plan, target, draft, prompt, samples=samples, seed=seed)
    return None if checked.passed else (
        f"sampled tokens do not follow the target distribution (chi-square p-values "
        f"{list(checked.p_values)})")


def generation_clause(
    report: ConformanceReport, name: str, plan: SpecPlan, run: Callable[[], str | None],
    family: str = "lossless",
) -> None:
    """Run one generation check: a mismatch is SR154, a coded error its own problems, any
    other exception (a width disagreeing with the kernels' shapes, a crash) SR155."""
    subject = plan.cache.name if family == "cache" and plan.cache else plan.algorithm.name
    try:
        mismatch = run()
    except SpecRegError as exc:  # coded already (a drafter's bad proposals: SR147/148)
        for found in exc.problems:
            report.record(family, name, found)
        return
    except Exception as exc:  # noqa: BLE001 - a plugin's object crashing is a failure to report
        report.record(family, name, problem(
            "SR155", f"generating with the plan of {subject!r} raised {type(exc).__name__}: "
            f"{exc or '(no message)'}",
            accepted="a verifier, drafter and swapper that run at the plan's sizes",
            fix="size every tensor from the plan (plan.gamma, plan.num_tokens_per_req(phase)) "
            "and raise coded errors for inputs the object refuses",
        ))
        return
    report.record(family, name, mismatch and problem(
        "SR154", f"with the plan of {subject!r}, {mismatch}",
        accepted="output equal to plain decoding (greedy) and the target's distribution "
        "(sampling)",
        fix="accept a draft only where plain decoding would emit it (greedy) or with "
        "min(1, p/q) (sampling), and emit the bonus from the target",
    ) or None)


def _spread(items: list[Any], count: int) -> Iterable[Any]:
    if len(items) <= count:
        return items
    step = (len(items) - 1) / (count - 1)
    return [items[round(i * step)] for i in range(count)]
