"""Penalties and logit bias on CPU: chain verification with `penalties=` against the same verify
without them.

    python benchmarks/bench_penalties.py          # b=64, n=8, V=32768, history 1,024, one thread

Inputs are those of bench_sampling_params.py with the mixed parameter batch; every request has
a prompt of --history // 2 tokens, an output of --history // 2, repetition 1.1, frequency 0.3,
presence 0.2 and 8 biased tokens. From one run, median of --repeats: `verify` (no penalties),
`verify_penalised` (the same with `penalties=`: the target penalised in place at every position,
counting the drafts before it), their ratio (the issue asks <= 1.3x), and `dense`: what a
framework does instead, vLLM-style dense [b, V] counts and masks applied to every position.
"""

from __future__ import annotations

import argparse

import torch
from bench_sampling_params import make_inputs, timed

from specreg.testing.demo_params import mixed_demo_params
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.penalties import Penalties


def make_penalties(b: int, vocab: int, history: int, seed: int) -> Penalties:
    gen = torch.Generator().manual_seed(seed)
    half = history // 2
    prompt = torch.randint(0, vocab, (b, half), generator=gen).tolist()
    output = torch.randint(0, vocab // 8, (b, half), generator=gen).tolist()
    bias = [{int(t): 1.0 for t in torch.randperm(vocab, generator=gen)[:8]} for _ in range(b)]
    return Penalties.of(b, repetition=1.1, frequency=0.3, presence=0.2, prompt=prompt,
                        output=output, logit_bias=bias)


def dense(logits: torch.Tensor, pen: Penalties) -> None:
    """vLLM-style: dense counts and a prompt mask [b, V], applied to every position (drafts
    not counted, as vLLM's spec decode path does not)."""
    b, n, vocab = logits.shape
    counts = torch.zeros(b, vocab + 1, dtype=torch.int32)
    counts.scatter_add_(1, pen.output_tokens.clamp(min=0), torch.ones_like(pen.output_tokens, dtype=torch.int32))
    prompt = torch.zeros(b, vocab + 1, dtype=torch.bool)
    prompt.scatter_(1, pen.prompt_tokens.clamp(min=0), True)
    counts, prompt = counts[:, :vocab, None].transpose(1, 2), prompt[:, :vocab, None].transpose(1, 2)
    seen = prompt | (counts > 0)
    rep = pen.repetition[:, None, None]
    logits.copy_(torch.where(seen, torch.where(logits > 0, logits / rep, logits * rep), logits))
    logits -= pen.frequency[:, None, None] * counts + pen.presence[:, None, None] * (counts > 0)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--b", type=int, default=64)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--v", type=int, default=32768)
    parser.add_argument("--history", type=int, default=1024)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    x = make_inputs(args.b, args.n, args.v, 0)
    params = mixed_demo_params(args.b)
    pen = make_penalties(args.b, args.v, args.history, 1)
    work = x["target"].clone()

    def restore():
        work.copy_(x["target"])

    def verify():
        return verify_chain_with_params(x["candidates"], x["target"], x["draft"], params=params)

    def verify_penalised():
        work.copy_(x["target"])
        return verify_chain_with_params(x["candidates"], work, x["draft"], params=params,
                                        penalties=pen)

    def dense_then_verify():
        work.copy_(x["target"])
        dense(work, pen)
        return verify_chain_with_params(x["candidates"], work, x["draft"], params=params)

    t_restore = timed(restore, args.repeats)
    t_verify = timed(verify, args.repeats)
    t_pen = timed(verify_penalised, args.repeats) - t_restore
    t_dense = timed(dense_then_verify, args.repeats) - t_restore
    print(f"CPU, {torch.get_num_threads()} threads; b={args.b} n={args.n} V={args.v} "
          f"history={args.history}; median of {args.repeats}")
    print(f"verify {t_verify * 1e3:8.1f} ms   with penalties {t_pen * 1e3:8.1f} ms  "
          f"penalised / plain x{t_pen / t_verify:5.2f}   dense [b, V] penalties then verify "
          f"{t_dense * 1e3:8.1f} ms  x{t_pen / t_dense:5.2f} of it")


if __name__ == "__main__":
    main()
