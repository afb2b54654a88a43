"""Grammar bitmasks on CPU: chain verification with `token_bitmask=` against the same verify
without a mask, and the masking pass alone against its floor.

    python benchmarks/bench_grammar_masks.py             # b=64, n=8, V=32768, one thread

Inputs are those of bench_sampling_params.py with the mixed parameter batch, and a random
bitmask that allows about half of the vocabulary at each position (the drafts and the target's
top tokens always allowed, so acceptance is unchanged). From one run, median of --repeats:

- `verify`: `verify_chain_with_params` without a mask; `verify_masked`: the same with
  `token_bitmask=` (the target and draft masked in place, then verified); ratio (the issue
  asks <= 1.2x);
- `mask`: `apply_token_bitmask_` over the target and draft alone; `floor`: one in-place
  `add_` of ready-unpacked values over the same tensors (one read and one write of every
  score, what in-place masking must at least do); and xgrammar's own `apply_token_bitmask_inplace` on the same tensors (what a user
  would call instead, with the grammar extra installed).

No [b, n, V] copy is made: the scores are masked in place, the unpacked bits exist one row chunk
at a time.
"""

from __future__ import annotations

import argparse

import torch
from bench_sampling_params import make_inputs, timed

from specreg.testing.demo_params import mixed_demo_params
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.token_mask import apply_token_bitmask_, bitmask_words


def make_mask(x, seed: int) -> torch.Tensor:
    b, n, vocab = x["target"].shape
    gen = torch.Generator().manual_seed(seed)
    words = torch.randint(-2**31, 2**31 - 1, (b, n, bitmask_words(vocab)), generator=gen,
                          dtype=torch.int64).to(torch.int32)
    keep = torch.cat([x["candidates"][:, 1:], x["candidates"][:, -1:]], 1)  # drafts stay allowed
    for tokens in (keep, x["target"].argmax(-1)):
        word = words.gather(2, (tokens // 32)[:, :, None])
        words.scatter_(2, (tokens // 32)[:, :, None], word | (1 << (tokens % 32))[:, :, None].to(torch.int32))
    return words


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--b", type=int, default=64)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--v", type=int, default=32768)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--threads", type=int, default=1)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    x = make_inputs(args.b, args.n, args.v, 0)
    params = mixed_demo_params(args.b)
    words = make_mask(x, 1)
    fresh = {k: v.clone() for k, v in x.items()}

    def verify():
        return verify_chain_with_params(x["candidates"], x["target"], x["draft"], params=params)

    def verify_masked():
        target, draft = fresh["target"].copy_(x["target"]), fresh["draft"].copy_(x["draft"])
        return verify_chain_with_params(x["candidates"], target, draft, params=params,
                                        token_bitmask=words)

    def restore():
        fresh["target"].copy_(x["target"])
        fresh["draft"].copy_(x["draft"])

    def mask():
        apply_token_bitmask_(fresh["target"], words)
        apply_token_bitmask_(fresh["draft"], words[:, :-1])

    ready = torch.where(torch.rand(x["target"].shape) < 0.5, 0.0, float("-inf"))

    def floor():  # one read-modify-write pass over the scores with the values already unpacked
        fresh["target"].add_(ready)
        fresh["draft"].add_(ready[:, :-1])

    def engine_mask():  # what a user would call instead: the grammar engine's own in-place mask
        import xgrammar

        b, n, vocab = fresh["target"].shape
        xgrammar.apply_token_bitmask_inplace(fresh["target"].view(b * n, vocab), words.view(b * n, -1))
        xgrammar.apply_token_bitmask_inplace(fresh["draft"].reshape(b * (n - 1), vocab),
                                             words[:, :-1].reshape(b * (n - 1), -1))

    t_restore = timed(restore, args.repeats)  # the copies verify_masked makes first
    t_verify = timed(verify, args.repeats)
    t_masked = timed(verify_masked, args.repeats) - t_restore
    t_mask = timed(mask, args.repeats)
    t_floor = timed(floor, args.repeats)
    accepted = float(verify_masked().accept_len.float().mean())
    print(f"CPU, {torch.get_num_threads()} threads; b={args.b} n={args.n} V={args.v}; median of "
          f"{args.repeats}; mixed parameters, mean accepted {accepted:.2f}")
    print(f"verify {t_verify * 1e3:8.1f} ms   verify with mask {t_masked * 1e3:8.1f} ms  "
          f"masked / plain x{t_masked / t_verify:5.2f}")
    print(f"mask alone {t_mask * 1e3:8.1f} ms   floor (add_ of ready values) "
          f"{t_floor * 1e3:8.1f} ms  x{t_mask / t_floor:5.2f}")
    try:
        t_engine = timed(engine_mask, args.repeats)
    except ImportError:
        print("xgrammar not installed (the grammar extra): no engine comparison")
    else:
        print(f"xgrammar.apply_token_bitmask_inplace {t_engine * 1e3:8.1f} ms  "
              f"specreg mask / it x{t_mask / t_engine:5.2f}")


if __name__ == "__main__":
    main()
