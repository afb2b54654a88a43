"""The drafter-invariant verify mode on real text: its acceptance beside the standard rule's and
the (1 - d) / (1 + d) bound, and its tokens beside plain sampling's, on Python's standard library.

Requests are held-out standard-library files (the real-text benchmark's split and byte-level
BPE tokenizer, `bench_real_text.py`): each prompt is a file's first `--prompt` tokens, then
`--new` tokens are SAMPLED at temperature `--temperature` from a target model, a count trigram
LM (`specreg.testing.count_models.CountLM`) fitted on every training file. The draft model is
the same kind of LM fitted on a quarter of them (a weaker model of the same text), drafting k
tokens per step with `specreg.step.draft_sampling.sample_rows` (the keyed SAMPLE-role race on its q,
at each draft's absolute output position, under the request's key). Every verify is specreg's
`ChainVerifier.verify_sampling` on the target's and the draft's rows, once with the standard
rule and once with `invariant=True`, on the same keys.

Printed per k and mode: the mean accepted length (tokens per verify, the bonus included), the
acceptance rate of the first draft of each step, and beside it what the theory says of that
first draft: the standard rule accepts it with probability 1 - d, the invariant rule with at
least (1 - d) / (1 + d) (Daliri, Musco, Suresh 2024), d the total variation between the
target's and the draft's rows at that position, averaged over the steps. Last, whether every
request's first `--new` tokens under the invariant rule equal plain keyed sampling's (the same
loop verifying no drafts: one SAMPLE-role draw per step), for each k, and the standard rule's
(which need not).

    pip install -e '.[bench]'
    python benchmarks/bench_invariant_real_text.py [--files 24] [--prompt 128] [--new 128]
        [--ks 2,4] [--temperature 0.8]
"""

from __future__ import annotations

import argparse
import sysconfig
import time
from pathlib import Path

import torch
from bench_real_text import stdlib_files, train_tokenizer

from specreg.step.chain_verifier import ChainVerifier
from specreg.step.draft_sampling import sample_rows
from specreg.contract.sampling_params import SamplingParams
from specreg.testing.count_models import CountLM

KEY_BASE = 0x5EED_0000


def generate(target: CountLM, draft: CountLM, prompts: list[list[int]], new: int, k: int,
             batch: int, temperature: float, invariant: bool) -> dict:
    """Sample `new` tokens after each prompt, k drafts per verify (k = 0: plain sampling)."""
    verifier = ChainVerifier(k + 1)
    outputs, verifies, emitted, first, accepted_first, tv, bound = [], 0, 0, 0, 0, 0.0, 0.0
    for start in range(0, len(prompts), batch):
        group = prompts[start : start + batch]
        b, length = len(group), len(group[0])
        seqs = torch.zeros((b, length + new + 2 * (k + 1)), dtype=torch.int64, device="cpu")
        seqs[:, :length] = torch.tensor(group, dtype=torch.int64, device="cpu")
        lengths = torch.full((b,), length, dtype=torch.int64, device="cpu")
        keys = torch.arange(start, start + b, dtype=torch.int64, device="cpu") + KEY_BASE
        params = SamplingParams.of(b, temperature=temperature)
        rows = torch.arange(b, device="cpu")
        while int((lengths - length).min()) < new:
            produced = lengths - length
            drafts, q = [], []
            for i in range(k):
                draw = sample_rows(draft.next_logits(seqs, lengths + i), params, keys=keys,
                                   positions=produced + i)
                seqs[rows, lengths + i] = draw.tokens
                drafts.append(draw.tokens)
                q.append(draw.q)
            p = torch.stack([
                torch.softmax(target.next_logits(seqs, lengths + j) / temperature, dim=-1)
                for j in range(k + 1)
            ], 1)
            anchor = seqs[rows, lengths - 1]
            candidates = torch.stack([anchor, *drafts], 1)
            result = verifier.verify_sampling(
                candidates, p, torch.stack(q, 1) if k else None, keys=keys,
                positions=produced, invariant=invariant,
            )
            count = result.num_accepted.to(torch.int64)
            active = produced < new  # finished requests ride along, unchanged and uncounted
            for r in active.nonzero().flatten().tolist():
                tokens = result.output_tokens[r, : int(count[r]) + 1]
                seqs[r, lengths[r] : lengths[r] + tokens.shape[0]] = tokens
            lengths += torch.where(active, count + 1, 0)
            verifies += int(active.sum())
            emitted += int((count + 1)[active].sum())
            if k:
                d = 0.5 * (p[active, 0] - q[0][active]).abs().sum(-1).double()
                first += int(active.sum())
                accepted_first += int((count[active] >= 1).sum())
                tv += float(d.sum())
                bound += float(((1 - d) / (1 + d)).sum())
        outputs += [seqs[r, length : length + new].tolist() for r in range(b)]
    return dict(tokens=outputs, mean_length=emitted / verifies,
                first_rate=accepted_first / max(first, 1), one_minus_d=1 - tv / max(first, 1),
                bound=bound / max(first, 1))


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=24, help="requests (held-out files)")
    parser.add_argument("--prompt", type=int, default=128)
    parser.add_argument("--new", type=int, default=128)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--ks", default="2,4")
    parser.add_argument("--temperature", type=float, default=0.8)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    started = time.perf_counter()
    files = stdlib_files(args.files)
    train, held_out = files[0::2], files[1::2]
    tokenizer = train_tokenizer(train, args.vocab)
    vocab = tokenizer.get_vocab_size()
    training = [tokenizer.encode(f.read_text(encoding="utf-8", errors="replace")).ids
                for f in train]
    target = CountLM.fit(training, vocab)
    draft = CountLM.fit(training[::4], vocab)
    prompts = []
    for f in held_out:
        ids = tokenizer.encode(f.read_text(encoding="utf-8", errors="replace")).ids
        if len(ids) >= args.prompt:
            prompts.append(ids[: args.prompt])
    print(f"# {len(prompts)} requests from {Path(sysconfig.get_paths()['stdlib'])} (BPE vocab "
          f"{vocab}), prompt {args.prompt}, {args.new} sampled tokens each at temperature "
          f"{args.temperature}, batch {args.batch}, torch threads 1")
    print(f"# target: count trigram LM on {len(training)} training files "
          f"({sum(map(len, training))} tokens); draft: the same LM on {len(training[::4])} of "
          f"them ({sum(map(len, training[::4]))} tokens)")
    run = dict(target=target, draft=draft, prompts=prompts, new=args.new, batch=args.batch,
               temperature=args.temperature)
    plain = generate(k=0, invariant=False, **run)["tokens"]
    print(f"\n{'k':>3} {'rule':<10} {'mean accepted length':>21} {'first draft accepted':>21} "
          f"{'1 - d':>7} {'(1-d)/(1+d)':>12} {'tokens = plain sampling':>24}")
    for k in (int(x) for x in args.ks.split(",")):
        for name, invariant in (("standard", False), ("invariant", True)):
            found = generate(k=k, invariant=invariant, **run)
            same = sum(a == b for a, b in zip(found["tokens"], plain, strict=True))
            print(f"{k:>3} {name:<10} {found['mean_length']:>21.3f} {found['first_rate']:>21.3f} "
                  f"{found['one_minus_d']:>7.3f} {found['bound']:>12.3f} "
                  f"{f'{same}/{len(plain)} requests':>24}")
    print(f"\n# {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
