"""Per-step cost of `plan.num_tokens_per_req` against a direct call and a pluggy hook call.

Prints ns per call and the ratios, all measured in one run on this machine. Target: the plan
within 1.5x of a direct Python function call.

    python benchmarks/bench_plan.py [--repeat 7] [--number 200000]
"""

from __future__ import annotations

import argparse
import timeit

import pluggy

from specreg import AlgorithmSpec, ParamRange, Phase, Registry, hookimpl

SPEC = AlgorithmSpec(
    name="benchalgo",
    drafting="tree",
    verify_rules=("tree_greedy",),
    num_steps=ParamRange(1, 8, 3),
    topk=ParamRange(1, 8, 4),
    num_draft_tokens=ParamRange(2, 64, 8),
)


class BenchVerifier:
    """A tree verifier that is never called: resolve needs one for a tree algorithm (SR124),
    and this benchmark times the plan's widths only."""

    rules = ("tree_greedy",)

    def __init__(self, resolution):
        self.num_draft_tokens = resolution.target[Phase.TARGET_VERIFY]
        self.widths = (self.num_draft_tokens,)

    def verify_greedy(self, tree, target_logits=None, *, draft_lengths=None):
        raise NotImplementedError("bench_plan times plan widths only")

    def verify_sampling(self, tree, target_probs, *, draft_probs=None, keys=None,
                        positions=None, generator=None, draft_lengths=None):
        raise NotImplementedError("bench_plan times plan widths only")


class BenchPlugin:
    @hookimpl
    def specreg_register_algorithms(self, register):
        register(SPEC)

    @hookimpl
    def specreg_make_verifier(self, config, algorithm, resolution, memo):
        return BenchVerifier(resolution) if algorithm.name == SPEC.name else None


WIDTHS = {"draft_decode": 4, "draft_extend": 8, "target_verify": 8}


def direct_width(phase, is_draft_worker=False):
    """The baseline: a plain function returning the width from a dict."""
    return WIDTHS[phase]


def make_pluggy_hook():
    """A one-implementation firstresult pluggy hook answering the same question."""
    spec = pluggy.HookspecMarker("bench")
    impl = pluggy.HookimplMarker("bench")

    class Specs:
        @spec(firstresult=True)
        def width(self, phase, is_draft_worker):
            """Width of a phase."""

    class Impl:
        @impl
        def width(self, phase, is_draft_worker):
            return WIDTHS[phase]

    pm = pluggy.PluginManager("bench")
    pm.add_hookspecs(Specs)
    pm.register(Impl())
    return pm.hook.width


def best_ns(stmt, number, repeat, globs):
    times = timeit.repeat(stmt, number=number, repeat=repeat, globals=globs)
    return min(times) / number * 1e9


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    parser.add_argument("--number", type=int, default=200_000)
    args = parser.parse_args()

    registry = Registry()
    registry.register_plugin(BenchPlugin(), "bench")
    plan = registry.resolve({"algorithm": "benchalgo"})
    hook = make_pluggy_hook()
    phase = Phase.TARGET_VERIFY
    assert plan.num_tokens_per_req(phase) == direct_width("target_verify") == hook(
        phase="target_verify", is_draft_worker=False
    )
    globs = {"plan": plan, "direct_width": direct_width, "hook": hook, "phase": phase}
    rows = [
        ("direct function call", "direct_width(phase, False)"),
        ("plan.num_tokens_per_req (Phase)", "plan.num_tokens_per_req(phase, False)"),
        ("plan.num_tokens_per_req (str)", "plan.num_tokens_per_req('target_verify', False)"),
        ("pluggy hook call", "hook(phase=phase, is_draft_worker=False)"),
    ]
    results = {name: best_ns(stmt, args.number, args.repeat, globs) for name, stmt in rows}
    base = results["direct function call"]
    print(f"{'call':<34} {'ns/call':>9} {'vs direct':>10}")
    for name, ns in results.items():
        print(f"{name:<34} {ns:>9.1f} {ns / base:>9.2f}x")
    ratio = results["plan.num_tokens_per_req (Phase)"] / base
    print(f"\nplan / direct = {ratio:.2f}x (target <= 1.5x); "
          f"pluggy / plan = {results['pluggy hook call'] / results['plan.num_tokens_per_req (Phase)']:.1f}x")


if __name__ == "__main__":
    main()
