"""Mean accepted length of every algorithm on real text: Python's standard library, replayed.

The text is the source of Python's standard library (every machine has it; nobody here wrote
it), tokenised with a byte-level BPE tokenizer trained here with the `tokenizers` library on
one half of the files (no hub download). Each file of the other half is one request: its first
`--prompt` tokens are the prompt, the next `--new` tokens what a `ReplayTarget` emits greedily,
so a draft is accepted exactly when it is the file's next token. Requests run `--batch` at a
time, one batch after another, so the global suffix tree holds earlier responses as it does in a
server. Every algorithm sees the same streams and the same verifier (specreg's chain verifier,
ragged by the proposal's length; the lookup tree verifier for trees).

Rows: specreg's `ngram` (vLLM's chain rule; SGLang-style trees), `suffix` (chain and tree),
arctic-inference's `SuffixDecodingCache` (vLLM's `suffix` backend, chain and tree) on the same
calls, and the tutorial plugin `ngram_example`; then the model-based drafters (draft_model,
EAGLE chain and tree, Medusa, DFlash, DSpark), whose network is a count-based trigram/skip-gram
model fitted on the tokenizer's training half (never on the replayed files), DSpark's Markov head
a truncated SVD of that model's bigram PMI: see benchmarks/real_text_drafters.py for what stands
in for what. Columns: mean accepted length
(tokens emitted per verify, the bonus included) per draft length k (the verify width is k + 1,
a chain's or a tree's), and for the history drafters the proposal time per emitted token (the
drafter's update and lookup, measured around its calls only), one run.

    pip install -e '.[bench]'       # tokenizers; arctic-inference: build_arctic_suffix.py
    python benchmarks/bench_real_text.py [--files 48] [--new 384] [--ks 2,4,8,16]
        [--rows dflash,dspark] [--markov-rank 64]

The whole table takes tens of minutes on a loaded machine: fewer `--files`, fewer `--ks` and
`--rows` (only the rows whose name contains one of the given words) trim it.
"""

from __future__ import annotations

import argparse
import sys
import sysconfig
import time
from collections.abc import Callable
from pathlib import Path

import torch
from specreg_lookup.drafter import NgramDrafter, SuffixDrafter
from specreg_lookup.kernels.match_tree import LookupTree
from specreg_lookup.sizes import NgramOptions, SuffixOptions
from specreg_lookup.verifier import LookupVerifier

from specreg.step.chain_verifier import ChainVerifier
from specreg.testing.count_models import CountLM
from specreg.testing.replay import ReplayTarget

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
from floors import absent_line  # noqa: E402
from real_text_drafters import MARKOV_RANK, model_rows, run_model_row  # noqa: E402


# ------------------------------------------------------------------------------ the corpus
def stdlib_files(limit: int) -> list[Path]:
    """The standard library's .py files (no tests, no site-packages), in a fixed order."""
    root = Path(sysconfig.get_paths()["stdlib"])
    files = [p for p in sorted(root.rglob("*.py"))
             if "site-packages" not in p.parts and "test" not in p.parts
             and "tests" not in p.parts and p.stat().st_size > 6000]
    step = max(1, len(files) // (2 * limit))
    return files[::step][: 2 * limit]


def train_tokenizer(files: list[Path], vocab_size: int):
    from tokenizers import ByteLevelBPETokenizer

    tokenizer = ByteLevelBPETokenizer()
    tokenizer.train([str(f) for f in files], vocab_size=vocab_size, min_frequency=2,
                    show_progress=False)
    return tokenizer


# ------------------------------------------------------------------------------ proposers
Proposal = tuple[torch.Tensor, torch.Tensor] | LookupTree  # (drafts [b, k], counts [b]) or tree


class ArcticRows:
    """arctic-inference's SuffixDecodingCache driven exactly as vLLM's SuffixDecodingProposer
    drives it: start_request with the prompt, add_active_response with each step's new tokens,
    speculate on the last max_tree_depth tokens."""

    def __init__(self, options: SuffixOptions, k: int, tree: bool) -> None:
        from arctic_inference.suffix_decoding import SuffixDecodingCache

        self.cache = SuffixDecodingCache(max_tree_depth=options.max_tree_depth,
                                         max_cached_requests=options.max_cached_requests)
        self.options, self.k, self.tree = options, k, tree
        self.rows: dict[int, tuple[int, int]] = {}
        self.next_id = 0

    def start_batch(self) -> None:
        for req, _ in self.rows.values():
            self.cache.stop_request(req)
        self.rows = {}

    def drafts(self, history: torch.Tensor, lengths: torch.Tensor):
        """One (tokens, parents) per row; reads each row's tail only, as SuffixDrafter does."""
        o = self.options
        span = min(history.shape[1], o.max_tree_depth + self.k + 1)
        index = (lengths[:, None] - span + torch.arange(span)).clamp(min=0)
        tails = history.gather(1, index).tolist()
        out = []
        for r, (tail, length) in enumerate(zip(tails, lengths.tolist(), strict=True)):
            if r not in self.rows:
                self.cache.start_request(self.next_id, history[r, :length].tolist())
                self.rows[r] = (self.next_id, length)
                self.next_id += 1
            req, seen = self.rows[r]
            if length > seen:
                self.cache.add_active_response(req, tail[span - (length - seen) :])
                self.rows[r] = (req, length)
            draft = self.cache.speculate(
                req, tail[max(0, span - min(length, o.max_tree_depth)) :],
                max_spec_tokens=self.k, max_spec_factor=o.max_spec_factor,
                min_token_prob=o.min_token_prob, use_tree_spec=self.tree)
            out.append((list(draft.token_ids), list(draft.parents)))
        return out


def _chain(lists: list[list[int]], last: list[int], k: int) -> tuple[torch.Tensor, torch.Tensor]:
    rows = [d[:k] + [t] * (k - len(d[:k])) for d, t in zip(lists, last, strict=True)]
    return torch.tensor(rows, dtype=torch.long), torch.tensor([len(d[:k]) for d in lists])


def _tree(drafts: list[tuple[list[int], list[int]]], last: list[int], k: int) -> LookupTree:
    tokens, parents, valid, depth = [], [], [], []
    for (toks, pars), root in zip(drafts, last, strict=True):
        m = min(len(toks), k)
        par = [p + 1 for p in pars[:m]]
        dep = [0]
        for p in par:
            dep.append(dep[p] + 1)
        tokens.append([root, *toks[:m]] + [root] * (k - m))
        parents.append([-1, *par] + [0] * (k - m))
        valid.append([True] * (m + 1) + [False] * (k - m))
        depth.append(dep + [0] * (k - m))
    t = torch.tensor
    return LookupTree(tokens=t(tokens), parents=t(parents), valid=t(valid, dtype=torch.bool),
                      depth=t(depth))


def make_proposers(k: int) -> dict[str, tuple[Callable[[], Callable[..., Proposal]], bool]]:
    """name -> (a factory of a fresh proposer over one run, whether it proposes trees)."""
    ngram = NgramOptions(min_ngram=1, max_ngram=4)
    suffix = SuffixOptions(max_tree_depth=24, max_cached_requests=10000)

    def ngram_chain():
        d = NgramDrafter(ngram, num_steps=k)

        def propose(h, L):
            p = d.lookup(h, L)
            return p.tokens, p.num_drafts
        return propose

    def ngram_tree():
        d = NgramDrafter(NgramOptions(min_ngram=1, max_ngram=4, proposals="tree",
                                      max_bfs_breadth=8), num_steps=k)
        return d.propose_tree

    def suffix_of(tree: bool):
        def factory():
            d = SuffixDrafter(SuffixOptions(max_tree_depth=24, max_cached_requests=10000,
                                            proposals="tree" if tree else "chain"), num_steps=k)
            if tree:
                return d.propose_tree

            def propose(h, L):
                drafts = d.speculate_rows(h, L)
                last = h.gather(1, (L - 1)[:, None])[:, 0].tolist()
                return _chain([x.tokens for x in drafts], last, k)
            return propose
        return factory

    def arctic_of(tree: bool):
        def factory():
            a = ArcticRows(suffix, k, tree)

            def propose(h, L):
                last = h.gather(1, (L - 1)[:, None])[:, 0].tolist()
                drafts = a.drafts(h, L)
                return _tree(drafts, last, k) if tree else _chain([d[0] for d in drafts], last, k)
            propose.start_batch = a.start_batch  # type: ignore[attr-defined]
            return propose
        return factory

    def example():
        sys.path.insert(0, str(ROOT / "examples" / "specreg-ngram"))
        from specreg_ngram.drafter import NgramDrafter as ExampleDrafter

        d = ExampleDrafter(max_ngram=4, min_ngram=1, num_draft_tokens=k + 1)

        def propose(h, L):
            return d.propose(h, L), torch.full((h.shape[0],), k)  # it always proposes k
        return propose

    table = {
        "ngram chain (specreg)": (ngram_chain, False),
        "ngram tree (specreg)": (ngram_tree, True),
        "suffix chain (specreg)": (suffix_of(False), False),
        "suffix chain (arctic)": (arctic_of(False), False),
        "suffix tree (specreg)": (suffix_of(True), True),
        "suffix tree (arctic)": (arctic_of(True), True),
        "ngram_example (tutorial)": (example, False),
    }
    if arctic_absence() is not None:
        table = {n: v for n, v in table.items() if "arctic" not in n}
    return table


_ARCTIC: list[str | None] = []


def arctic_absence() -> str | None:
    """None when arctic-inference's suffix tree imports (built from its sdist by
    build_arctic_suffix.py, once, into the user's cache), else why not: printed, never silent."""
    if not _ARCTIC:
        from build_arctic_suffix import ArcticBuildError, ensure_built

        try:
            sys.path.insert(0, str(ensure_built()))
            import arctic_inference.suffix_decoding  # noqa: F401
        except (ArcticBuildError, ImportError, OSError) as exc:
            _ARCTIC.append(f"arctic-inference's suffix tree is not available: {exc}")
            print(absent_line("suffix rows of arctic-inference (real text)", _ARCTIC[0]))
        else:
            _ARCTIC.append(None)
    return _ARCTIC[0]


# ------------------------------------------------------------------------------ the run
def run(propose: Callable[..., Proposal], tree: bool, streams: list[list[int]], vocab: int,
        prompt: int, new: int, k: int, batch: int) -> tuple[float, float, int]:
    """(mean accepted length, proposal seconds per emitted token, verify steps)."""
    chain_verifier = ChainVerifier(k + 1)
    tree_verifier = LookupVerifier(num_draft_tokens=k + 1)
    emitted = steps = 0
    spent = 0.0
    for first in range(0, len(streams), batch):
        group = streams[first : first + batch]
        if hasattr(propose, "start_batch"):
            propose.start_batch()
        width = prompt + new + k + 2
        history = torch.tensor([s[:width] for s in group], dtype=torch.long)
        target = ReplayTarget(history, vocab)
        b = history.shape[0]
        lengths = torch.full((b,), prompt, dtype=torch.long)
        while int(lengths.min()) < prompt + new:
            start = time.perf_counter()
            proposal = propose(history, lengths)
            spent += time.perf_counter() - start
            if tree:
                positions = (lengths - 1)[:, None] + proposal.depth
                out = tree_verifier.verify_tree_greedy(proposal, target.logits(positions))
            else:
                drafts, counts = proposal
                cands = torch.cat([history.gather(1, (lengths - 1)[:, None]), drafts], dim=1)
                positions = (lengths - 1)[:, None] + torch.arange(k + 1)[None, :]
                out = chain_verifier.verify_greedy(cands, target.logits(positions),
                                                   verify_lens=counts + 1)
            n = out.num_accepted.long() + 1
            active = lengths < prompt + new
            # replayed greedy output is the stream itself: check it, then commit it
            for r in torch.nonzero(active).flatten().tolist():
                got = out.output_tokens[r, : int(n[r])].tolist()
                want = history[r, int(lengths[r]) : int(lengths[r]) + int(n[r])].tolist()
                assert got == want, (r, got, want)
            emitted += int(n[active].sum())
            steps += int(active.sum())
            lengths = torch.where(active, lengths + n, lengths)
    return emitted / steps, spent / emitted, steps


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--files", type=int, default=48, help="requests (held-out files)")
    parser.add_argument("--prompt", type=int, default=256)
    parser.add_argument("--new", type=int, default=384)
    parser.add_argument("--batch", type=int, default=8)
    parser.add_argument("--vocab", type=int, default=8192)
    parser.add_argument("--ks", default="2,4,8,16")
    parser.add_argument("--no-models", action="store_true",
                        help="history drafters only (no fitted draft models)")
    parser.add_argument("--rows", default="",
                        help="comma-separated words: run only the rows whose name contains one")
    parser.add_argument("--markov-rank", type=int, default=MARKOV_RANK,
                        help="rank of the DSpark row's Markov head (its bigram SVD)")
    args = parser.parse_args(argv)
    words = [w.strip() for w in args.rows.split(",") if w.strip()]

    def wanted(name: str) -> bool:
        return not words or any(w in name for w in words)
    torch.set_num_threads(1)
    files = stdlib_files(args.files)
    train, held_out = files[0::2], files[1::2]
    tokenizer = train_tokenizer(train, args.vocab)
    need = args.prompt + args.new + 64
    streams = []
    for f in held_out:
        ids = tokenizer.encode(f.read_text(encoding="utf-8", errors="replace")).ids
        if len(ids) >= need:
            streams.append(ids[:need])
    vocab = tokenizer.get_vocab_size()
    ks = [int(x) for x in args.ks.split(",")]
    print(f"# {len(streams)} requests from {Path(sysconfig.get_paths()['stdlib'])} "
          f"(BPE vocab {vocab}, trained on {len(train)} other files), prompt {args.prompt}, "
          f"{args.new} replayed tokens each, batch {args.batch}, torch threads 1")
    results: dict[str, dict[int, tuple[float, float, int]]] = {}
    for k in ks:
        for name, (factory, tree) in make_proposers(k).items():
            if not wanted(name):
                continue
            results.setdefault(name, {})[k] = run(factory(), tree, streams, vocab, args.prompt,
                                                  args.new, k, args.batch)
    history = list(results)
    models = not args.no_models and any(wanted(n) for n in model_rows(max(ks), vocab))
    if models:
        from specreg import Registry

        started = time.perf_counter()
        training = [tokenizer.encode(f.read_text(encoding="utf-8", errors="replace")).ids
                    for f in train]
        model = CountLM.fit(training, vocab, offsets=max(ks))
        print(f"# draft networks: a count trigram LM with skip-gram offsets 0..{max(ks) - 1}, "
              f"fitted on the {len(train)} tokenizer files ({sum(map(len, training))} tokens) "
              f"in {time.perf_counter() - started:.1f} s; the replayed files are not among them")
        registry = Registry.load(fresh=True)
        for k in ks:
            for name, (config, step) in model_rows(k, vocab,
                                                   markov_rank=args.markov_rank).items():
                if not wanted(name):
                    continue
                results.setdefault(name, {})[k] = run_model_row(
                    registry, config, step, model, streams, vocab, args.prompt, args.new,
                    args.batch)
    names = list(results)
    print("\nmean accepted length (tokens per verify, bonus included)")
    print(f"{'algorithm':<26}" + "".join(f"{'k=' + str(k):>9}" for k in ks))
    for name in names:
        print(f"{name:<26}" + "".join(f"{results[name][k][0]:>9.3f}" for k in ks))
    print("\nproposal time per emitted token (us)")
    print(f"{'algorithm':<26}" + "".join(f"{'k=' + str(k):>9}" for k in ks))
    for name in history:
        print(f"{name:<26}" + "".join(f"{results[name][k][1] * 1e6:>9.1f}" for k in ks))
    for mode in ("chain", "tree"):
        ours, theirs = f"suffix {mode} (specreg)", f"suffix {mode} (arctic)"
        if theirs in results and ours in results:
            acc = [results[ours][k][0] / results[theirs][k][0] for k in ks]
            speed = [results[theirs][k][1] / results[ours][k][1] for k in ks]
            print(f"\nsuffix {mode}: specreg/arctic accepted length "
                  + ", ".join(f"k={k}: {a:.3f}" for k, a in zip(ks, acc, strict=True))
                  + "; arctic/specreg proposal time (above 1: specreg faster) "
                  + ", ".join(f"k={k}: {s:.2f}" for k, s in zip(ks, speed, strict=True)))
    if models:
        print("\nmodel rows: the network is the fitted count model, not a trained neural drafter "
              "(draft_model: the trigram LM as the draft model; eagle: the LM as EAGLE's draft "
              "network over each branch; medusa: skip-gram offsets as heads; dflash: the same "
              "offsets as the block's slot logits; dspark: those slot logits walked through "
              f"DSpark's vanilla Markov head, its weights a rank-{args.markov_rank} truncated SVD "
              "of the count model's bigram PMI). Every emitted token was checked against the "
              "replayed stream.")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
