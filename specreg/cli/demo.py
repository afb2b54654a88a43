"""`specreg demo`: every registered algorithm on the toy model, with and without each KV cache.

Each row runs greedy generation (checked token for token against plain greedy decoding) and a
sampling run (first two tokens checked against the target's exact marginals by chi-square). The
"mixed params" row of each algorithm whose verifier takes per-request `SamplingParams` runs
batches mixing greedy, temperature, top-k, top-p and min-p requests: its greedy requests are
checked against plain greedy decoding, each sampled kind's first tokens against the exact
filtered, temperature-scaled target by chi-square; where the drafter can, the sampled requests'
drafts are drawn from their own filtered q and verified by the with-draft rule, and the row
names the rule that ran. The "json schema" row of each such
algorithm (with the `grammar` extra, xgrammar, installed) decodes under a JSON-schema grammar
with the grammar's token bitmask at every verified node (`specreg.testing.grammar`): every
emitted token must be accepted by the grammar, greedy must equal plain constrained greedy
decoding, and the first two sampled tokens must follow non-speculative constrained sampling by
chi-square. The default row of each algorithm (no cache) also runs the drafter-invariant verify
mode (`verify_mode='invariant'`) on sampled generation with fixed request keys: its tokens must
equal plain keyed sampling (the same loop with no drafts) token for token, and its acceptance
per draft is shown beside the standard rule's on the same keys; algorithms whose verifiers do not
run the mode say so (SR133). It exits non-zero when any check fails.
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
import time
from collections.abc import Iterator
from typing import Any

import attrs
import torch

from specreg.step.acceptance_stats import AcceptanceSnapshot
from specreg.cli.demo_args import MAX_STEPS, PROMPT_LEN, VERIFY_MARGIN, range_problem
from specreg.cli.demo_output import save_metrics, save_plot
from specreg.cli.demo_text import CONSTRAINED_LABEL, MIXED_PARAMS_LABEL, format_text
from specreg.errors import ConfigError, PluginError, SpecRegError, dedupe_problems
from specreg.registry.plan import SpecPlan
from specreg.contract.protocols import drafter_needs
from specreg.registry.registry import Registry
from specreg.contract.specs import AlgorithmSpec
from specreg.testing.conformance import plugin_faults
from specreg.testing.drafter_checks import drafter_label, no_drafting_code
from specreg.testing.kv import toy_cache_options
from specreg.testing.loop import GenerationResult, params_method
from specreg.testing.lossless import (
    P_VALUE_THRESHOLD,
    check_greedy,
    check_mixed_params,
    check_sampling,
)
from specreg.testing.toy_model import ToyConfig, ToyLM

DRAFT_NOISE = 0.25
#: The toy target's induction head (`ToyConfig.copy_bonus`): its text repeats, so drafters that
#: look up the history find continuations (at 0 they accept almost nothing).
COPY_BONUS = 12.0
GREEDY_PROMPTS = 4
SAMPLING_SAMPLES = 2000
MIXED_PARAMS_TOKENS = 16  # greedy-equality length of the mixed row (its batch is 6x wider)


def demo_models(seed: int) -> tuple[ToyLM, ToyLM]:
    """The demo's toy target (its text repeats: `COPY_BONUS`) and the draft model made from it."""
    target = ToyLM(ToyConfig(copy_bonus=COPY_BONUS), seed=seed)
    return target, target.perturbed(DRAFT_NOISE, seed=seed + 1)


def demo_prompts(toy: ToyConfig, seed: int) -> torch.Tensor:
    """The prompts every row generates from: random tokens (the mask token aside), seeded."""
    g = torch.Generator().manual_seed(seed)
    return torch.randint(0, toy.vocab_size - 1, (GREEDY_PROMPTS, PROMPT_LEN), generator=g)


def toy_draft_checkpoint(config: ToyConfig, **overrides: Any) -> dict[str, Any]:
    """The toy draft model's config.json, in the keys block drafters read."""
    data: dict[str, Any] = {
        "architectures": ["ToyDraft"],
        "vocab_size": config.vocab_size,
        "hidden_size": config.dim,
        "num_hidden_layers": 1,
        "num_target_layers": 8,
        "target_layer_ids": [3],
        "block_size": 4,
        "mask_token_id": config.vocab_size - 1,
        "markov_rank": 8,
        "markov_head_type": "vanilla",
    }
    data.update(overrides)
    return data


#: The verify width of a chain algorithm whose default width is inferred.
DEMO_CHAIN_WIDTH = 4


@attrs.frozen
class DemoCase:
    label: str
    config: dict[str, Any]
    mixed_params: bool = False  # a batch of per-request SamplingParams (check_mixed_params)
    constrained: bool = False  # decoded under the demo's JSON-schema grammar (check_constrained)


def demo_cases(algorithm: AlgorithmSpec, toy: ToyConfig) -> list[DemoCase]:
    """Configs to run for one algorithm, chosen from its declared capabilities."""
    base: dict[str, Any] = {"algorithm": algorithm.name}
    if algorithm.drafting == "block":
        base["draft_config"] = toy_draft_checkpoint(toy)
    if algorithm.drafting == "chain" and algorithm.num_draft_tokens.default is None:
        # inferred from the algorithm's own options, the width may outgrow the toy target's
        # window and the toy cache's sequences: run the common chain width instead
        base["num_draft_tokens"] = DEMO_CHAIN_WIDTH
    cases = [DemoCase("default", base)]
    if algorithm.drafting == "tree" and (algorithm.topk.maximum or 4) >= 4:
        cases.append(
            DemoCase("tree k4", {**base, "num_steps": 3, "topk": 4, "num_draft_tokens": 8})
        )
    return cases


def mixed_params_case(registry: Registry, algorithm: AlgorithmSpec, toy: ToyConfig) -> DemoCase | None:
    """The "mixed params" case of `algorithm` when its plan's verifier takes per-request
    sampling parameters (`params_method`), else None. A plan that fails to resolve gets no
    such case: its default row reports the error."""
    base = demo_cases(algorithm, toy)[0].config
    try:
        plan = registry.resolve(base)
    except Exception:  # noqa: BLE001 - the default row shows why
        return None
    if params_method(plan.verifier) is None:
        return None
    return DemoCase(MIXED_PARAMS_LABEL, base, mixed_params=True)


def constrained_case(registry: Registry, algorithm: AlgorithmSpec, toy: ToyConfig) -> DemoCase | None:
    """The "json schema" case of `algorithm`: as the mixed-params case (its verifier takes the
    grammar's bitmask with per-request parameters), when xgrammar is installed."""
    mixed = mixed_params_case(registry, algorithm, toy)
    if mixed is None or importlib.util.find_spec("xgrammar") is None:
        return None
    return DemoCase(CONSTRAINED_LABEL, mixed.config, constrained=True)


@attrs.define
class DemoRow:
    algorithm: str
    case: str
    cache: str
    config: dict[str, Any]
    mean_accepted_length: float = 0.0
    tokens_per_target_forward: float = 0.0
    greedy_lossless: bool = False
    sampling_lossless: bool = False
    sampling_p_values: tuple[float, ...] = ()
    sampling_checks: tuple[str, ...] = ()  # what each p-value tested
    verify_rule: str = ""  # the mixed row's rule for sampled requests (specreg.testing.draft_rules)
    hit_rate: float | None = None
    bytes_copied: float | None = None
    backend: str = ""
    accept_lengths: list[int] = attrs.field(factory=list)
    acceptance: AcceptanceSnapshot | None = None  # the greedy run's, per draft position
    drafter: str = ""
    drafts_from: str | None = None  # what the plan's drafter needs (specreg.contract.protocols)
    grammar_violations: int | None = None  # emitted tokens the grammar refused (constrained row)
    #: the invariant verify mode (default rows): tokens equal plain keyed sampling, its accepted
    #: drafts per draft and the standard rule's on the same keys; or why it does not run
    invariant_equal: bool | None = None
    invariant_acceptance: float | None = None
    standard_acceptance: float | None = None
    invariant_note: str | None = None
    notice: str | None = None
    error: str | None = None
    seconds: float = 0.0

    @property
    def lossless(self) -> bool:
        invariant = self.invariant_equal is not False
        return (self.error is None and self.greedy_lossless and self.sampling_lossless
                and invariant)

    def to_dict(self) -> dict[str, Any]:
        data = attrs.asdict(self)
        data["lossless"] = self.lossless
        data["sampling_p_value_threshold"] = P_VALUE_THRESHOLD  # each p-value passes above it
        data.pop("accept_lengths")
        data["accept_length_histogram"] = _histogram(self.accept_lengths)
        data["acceptance"] = self.acceptance.to_dict() if self.acceptance else None
        return data


def _histogram(values: list[int]) -> dict[str, int]:
    out: dict[str, int] = {}
    for v in values:
        out[str(v)] = out.get(str(v), 0) + 1
    return dict(sorted(out.items(), key=lambda kv: int(kv[0])))


def run_case(
    registry: Registry,
    algorithm: AlgorithmSpec,
    case: DemoCase,
    cache: str | None,
    *,
    num_new: int,
    seed: int,
    target: ToyLM,
    draft: ToyLM,
) -> DemoRow:
    config = dict(case.config)
    if cache:
        config["cache"] = cache
        declared = registry.get_cache(cache).options
        sized = toy_cache_options(
            max(SAMPLING_SAMPLES, GREEDY_PROMPTS), PROMPT_LEN + num_new + VERIFY_MARGIN, target
        )
        options = {k: v for k, v in sized.items() if k in declared}  # the toy's sizes it takes
        if options:
            config["cache_options"] = options
    shown = {k: v for k, v in config.items() if k not in ("draft_config", "cache_options")}
    row = DemoRow(algorithm.name, case.label, cache or "-", shown)
    started = time.perf_counter()
    try:
        plan: SpecPlan = registry.resolve(config)
        if case.label == "default":  # the defaults hide a resolution that ignores a number
            faults = plugin_faults(registry, algorithm, config)
            if faults:
                raise PluginError(dedupe_problems(found for _, found in faults))
        row.config = {
            k: v
            for k, v in plan.config.to_dict().items()
            if k not in ("draft_config", "cache_options")
        }
        row.drafter = drafter_label(plan)
        row.drafts_from = drafter_needs(plan.drafter)
        notice = no_drafting_code(plan)
        row.notice = notice.render() if notice else None
        prompts = demo_prompts(target.config, seed)
        if case.mixed_params:
            _run_mixed(row, plan, target, draft, prompts, seed=seed)
            return row
        if case.constrained:
            _run_constrained(row, plan, target, draft, prompts, seed=seed)
            return row
        greedy = check_greedy(plan, target, draft, prompts, num_new)
        row.greedy_lossless = greedy.passed
        _fill_metrics(row, greedy.result, num_new)
        sampled = check_sampling(
            plan, target, draft, prompts[0], samples=SAMPLING_SAMPLES, seed=seed
        )
        row.sampling_lossless = sampled.passed
        row.sampling_p_values = tuple(round(p, 4) for p in sampled.p_values)
        row.sampling_checks = ("first token", "second token")
        if case.label == "default" and not cache:
            _run_invariant(row, registry, config, target, draft, prompts, num_new, seed=seed)
    except SpecRegError as exc:
        row.error = str(exc)
    except Exception as exc:  # noqa: BLE001 - one broken plugin fails its row, not the demo
        row.error = f"{type(exc).__name__}: {exc}"
    finally:
        row.seconds = time.perf_counter() - started
    return row


def _fill_metrics(row: DemoRow, result: GenerationResult, num_new: int) -> None:
    """Acceptance, throughput and cache statistics of the row's greedy run."""
    row.accept_lengths = result.emitted_per_verify
    row.acceptance = result.acceptance
    row.mean_accepted_length = result.mean_accepted_length
    row.tokens_per_target_forward = num_new / result.target_forwards
    row.backend = result.backend
    if result.reader_stats:
        row.hit_rate = result.reader_stats["hit_rate"]
        row.bytes_copied = result.reader_stats["bytes_copied"]


def _run_invariant(
    row: DemoRow, registry: Registry, config: dict[str, Any], target: ToyLM, draft: ToyLM,
    prompts: torch.Tensor, num_new: int, *, seed: int,
) -> None:
    """The invariant verify mode's check (`specreg.testing.invariant`) on the row."""
    from specreg.testing.invariant import check_invariant

    found = check_invariant(registry, config, target, draft, prompts, num_new, seed=seed)
    row.invariant_equal, row.invariant_note = found.equal, found.note
    row.invariant_acceptance, row.standard_acceptance = found.invariant_rate, found.standard_rate


def _run_mixed(
    row: DemoRow, plan: SpecPlan, target: ToyLM, draft: ToyLM, prompts: torch.Tensor, *, seed: int
) -> None:
    checked = check_mixed_params(
        plan, target, draft, prompts, MIXED_PARAMS_TOKENS, samples=SAMPLING_SAMPLES, seed=seed
    )
    _fill_metrics(row, checked.result, MIXED_PARAMS_TOKENS)
    row.greedy_lossless = checked.greedy_passed
    row.sampling_lossless = checked.sampling_passed
    row.sampling_p_values = tuple(round(p, 4) for p in checked.p_values)
    row.sampling_checks = checked.kinds
    row.verify_rule = checked.result.verify_rule


def _run_constrained(
    row: DemoRow, plan: SpecPlan, target: ToyLM, draft: ToyLM, prompts: torch.Tensor, *, seed: int
) -> None:
    from specreg.testing.grammar import check_constrained

    checked = check_constrained(
        plan, target, draft, prompts, MIXED_PARAMS_TOKENS, samples=SAMPLING_SAMPLES, seed=seed
    )
    _fill_metrics(row, checked.result, MIXED_PARAMS_TOKENS)
    row.greedy_lossless = checked.greedy_passed
    row.sampling_lossless = checked.sampling_passed
    row.grammar_violations = checked.violations
    row.sampling_p_values = (round(checked.p_value, 4),)
    row.sampling_checks = ("first two tokens T=1",)


def _progress(items: list[Any], enabled: bool) -> Iterator[Any]:
    total = len(items)
    for i, item in enumerate(items):
        if enabled:
            done = int(30 * i / max(total, 1))
            sys.stderr.write(f"\r[{'#' * done}{'.' * (30 - done)}] {i}/{total}")
            sys.stderr.flush()
        yield item
    if enabled:
        sys.stderr.write(f"\r[{'#' * 30}] {total}/{total}\n")


def run_demo(
    *,
    algorithms: list[str] | None = None,
    kv_cache: str = "both",
    steps: int = 48,
    seed: int = 0,
    progress: bool = False,
    registry: Registry | None = None,
) -> list[DemoRow]:
    if not 1 <= steps <= MAX_STEPS:
        raise ConfigError(range_problem("--steps", steps, 1, MAX_STEPS, "48"))
    registry = registry or Registry.load()
    target, draft = demo_models(seed)
    toy = target.config
    chosen = (
        [registry.get_algorithm(name) for name in algorithms]
        if algorithms
        else registry.algorithms()
    )
    if kv_cache not in ("none", "both"):
        registry.get_cache(kv_cache)  # an unknown name is SR102, listing the registered caches
    every_cache: list[str | None] = [c.name for c in registry.caches()]
    choices: dict[str, list[str | None]] = {"none": [None], "both": [None, *every_cache]}
    caches = choices.get(kv_cache, [kv_cache])
    jobs = []
    for a in chosen:
        jobs += [(a, case, cache) for case in demo_cases(a, toy) for cache in caches]
        mixed = mixed_params_case(registry, a, toy)
        if mixed is not None:  # one row per capable algorithm, under the first cache chosen
            jobs.append((a, mixed, caches[0]))
        constrained = constrained_case(registry, a, toy)
        if constrained is not None:
            jobs.append((a, constrained, caches[0]))
    return [
        run_case(registry, a, case, cache, num_new=steps, seed=seed, target=target, draft=draft)
        for a, case, cache in _progress(jobs, progress)
    ]


def run_demo_cli(args: argparse.Namespace) -> int:
    rows = run_demo(
        algorithms=args.algorithm,
        kv_cache=args.kv_cache,
        steps=args.steps,
        seed=args.seed,
        progress=not args.no_progress and not args.json and sys.stderr.isatty(),
    )
    if args.json:
        print(json.dumps({"rows": [r.to_dict() for r in rows],
                          "all_lossless": all(r.lossless for r in rows)}, indent=2))
    else:
        print(format_text(rows))
        failed = [r for r in rows if not r.lossless]
        print(f"\n{len(rows) - len(failed)}/{len(rows)} rows lossless.")
    if args.plot:
        save_plot(rows, args.plot)
    if args.metrics:
        save_metrics(rows, args.metrics)
    return 0 if rows and all(r.lossless for r in rows) else 1
