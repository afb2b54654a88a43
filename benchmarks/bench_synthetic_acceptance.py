"""Verify and loop speed at a fixed acceptance, apart from draft quality (synthetic acceptance).

    python benchmarks/bench_synthetic_acceptance.py --threads 1              # b=32, n=6, V=32000
    python benchmarks/bench_synthetic_acceptance.py --b 8 --v 4096 --repeats 3 --steps 16

A plan resolved with `acceptance={"synthetic_length": L}` (vLLM's `synthetic_acceptance_length`;
SGLang's SGLANG_SIMULATE_ACC_LEN) accepts exactly L - 1 drafts per step whatever the drafts are,
so the measured cost is the verify kernel's and the loop's alone. Printed, from one run:

1. Verify. For every L in 1..n, the synthetic plan's `verify_sampling` (q given) on the same
   inputs: its time, the accepted count it produced (asserted equal to L - 1 for every request)
   and its time against (a) the lossless plan's verify of the same inputs, the rule a user would
   run, and (b) the floor of the same work (value checks off on both, as on a GPU): one read of the row each request emits from (b rows
   of V float32, `floors.read_rows`).
2. Loop. An EAGLE (topk 1) plan with the toy models of specreg.testing, greedy, for every L:
   tokens emitted per target forward (asserted equal to L: the loop's own bookkeeping at a known
   acceptance) and seconds per emitted token (the thread's CPU time with one torch thread), with the speed-up over L = 1 (no draft accepted)
   beside the ideal L x: what the loop's overhead per step leaves of the acceptance's gain.
"""

from __future__ import annotations

import argparse

import torch
from floors import clock, floor_line, interleaved_best, read_rows

from specreg import Registry
from specreg.testing.loop import SpeculativeLoop
from specreg.testing.toy_model import ToyConfig, ToyLM


def verify_inputs(b: int, n: int, vocab: int, seed: int) -> dict[str, torch.Tensor]:
    gen = torch.Generator().manual_seed(seed)
    p = torch.softmax(3 * torch.randn(b, n, vocab, generator=gen), -1)
    q = torch.softmax(3 * torch.randn(b, n - 1, vocab, generator=gen), -1)
    candidates = torch.randint(0, vocab, (b, n), generator=gen)
    agree = torch.rand(b, n - 1, generator=gen) < 0.7  # lossless: a partly accepted chain
    candidates[:, 1:] = torch.where(agree, p[:, :-1].argmax(-1), candidates[:, 1:])
    return {"candidates": candidates, "p": p, "q": q}


def bench_verify(registry: Registry, args: argparse.Namespace) -> None:
    b, n, vocab = args.b, args.n, args.v
    x = verify_inputs(b, n, vocab, 0)
    keys = torch.arange(b) + 1  # one stream key per request, the same every call
    lossless = registry.resolve({"algorithm": "draft_model", "num_draft_tokens": n}).verifier
    lossless.check_values = False  # time the rule, not the CPU value checks (both paths alike)
    print(f"verify: b={b}, n={n}, V={vocab}, best of {args.repeats}")
    for length in range(1, n + 1):
        plan = registry.resolve({"algorithm": "draft_model", "num_draft_tokens": n,
                                 "acceptance": {"synthetic_length": length}})
        assert plan.lossy
        synthetic = plan.verifier
        synthetic.check_values = False

        def run(verifier=synthetic):
            return verifier.verify_sampling(x["candidates"], x["p"], x["q"], keys=keys)

        def base():
            return lossless.verify_sampling(x["candidates"], x["p"], x["q"], keys=keys)

        found = run().num_accepted
        assert found.tolist() == [length - 1] * b, found
        times = interleaved_best(
            {"synthetic": run, "lossless": base, "floor": read_rows(x["p"], b)}, args.repeats
        )
        print(f"  L={length}: synthetic {times['synthetic'] * 1e3:.3f} ms, accepted "
              f"{length - 1}/{n - 1} per request; lossless verify {times['lossless'] * 1e3:.3f} ms "
              f"-> synthetic / lossless = {times['synthetic'] / times['lossless']:.2f}x")
        print(floor_line(f"synthetic verify L={length}", times["synthetic"], times["floor"],
                         "one read of each request's emitting row, b x V float32"))


def bench_loop(registry: Registry, args: argparse.Namespace) -> None:
    n = args.n
    target = ToyLM(ToyConfig(vocab_size=96, window=max(16, n)), seed=1)
    draft = target.perturbed(0.3, seed=2)
    prompts = torch.randint(0, 95, (args.loop_b, 5), generator=torch.Generator().manual_seed(0))
    print(f"loop: eagle topk 1, num_steps {n - 1}, b={args.loop_b}, {args.steps} new tokens, "
          "greedy, toy models")
    per_token = {}
    for length in range(1, n + 1):
        plan = registry.resolve({"algorithm": "eagle", "num_steps": n - 1, "topk": 1,
                                 "acceptance": {"synthetic_length": length}})
        torch.manual_seed(0)
        best, result, now = float("inf"), None, clock()
        for _ in range(args.repeats):
            start = now()
            result = SpeculativeLoop(plan, target, draft).generate(prompts, args.steps)
            best = min(best, now() - start)
        emitted = sum(result.emitted_per_verify)
        steps = len(result.emitted_per_verify)
        exact = sum(e == length for e in result.emitted_per_verify)
        assert max(result.emitted_per_verify) == length, result.emitted_per_verify
        assert exact >= steps - args.loop_b, result.emitted_per_verify  # the last step may be cut
        per_token[length] = best / emitted
        print(f"  L={length}: {emitted / steps:.2f} tokens per request step, "
              f"{per_token[length] * 1e6:.1f} us per emitted token, speed-up over L=1 "
              f"{per_token[1] / per_token[length]:.2f}x (ideal {length}x)")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--b", type=int, default=32)
    parser.add_argument("--n", type=int, default=6)
    parser.add_argument("--v", type=int, default=32000)
    parser.add_argument("--loop-b", type=int, default=4)
    parser.add_argument("--steps", type=int, default=48)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    registry = Registry.load()
    bench_verify(registry, args)
    bench_loop(registry, args)


if __name__ == "__main__":
    main()
