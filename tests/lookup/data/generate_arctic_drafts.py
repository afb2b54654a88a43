"""Generates `arctic_drafts.json.gz` beside it: what arctic-inference's own `SuffixDecodingCache`
drafts, call by call, chain and tree, on

- the real-text benchmark's token streams (`benchmarks/bench_real_text.py`): Python standard
  library files tokenised by the byte-level BPE tokenizer the benchmark trains, driven as the
  benchmark drives arctic (requests in batches, a global cache across them, the drafts verified
  greedily against the stream, so arctic's own drafts steer what each row emits), at the
  benchmark's options (trees 24 deep, 10,000 cached responses, k = 16);
- seeded random streams (the recipe of the former live test, seed 0 with its options, and
  further seeds with other options: evicting caches, no global tree, other factors and floors).

The streams themselves are in the data, so the test needs neither the tokenizer nor this
machine's standard library. arctic-inference is built from its sdist for CPU by
`benchmarks/build_arctic_suffix.py` (version, sdist checksum and upstream commit recorded); the
file names, the tokenizer and the Python whose standard library was read are recorded too.
Before writing, the real-text acceptance is checked against the benchmark's own loop
(`bench_real_text.run` with its arctic rows) on the same streams.

    pip install -e '.[bench]'   # tokenizers; g++ and pybind11 for the arctic build
    python tests/lookup/data/generate_arctic_drafts.py            # (re)write the data
    python tests/lookup/data/generate_arctic_drafts.py --check    # regenerate, compare with the
                                                                  # committed file
    python tests/lookup/data/generate_arctic_drafts.py --fuzz 200 # specreg against live arctic
                                                                  # on 200 more random streams

`tests/lookup/test_arctic_drafts.py` replays every call on specreg's `SuffixDrafter` each
CI run and compares.
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import importlib.util
import json
import platform
import random
import sys
import sysconfig
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
OUTPUT = HERE / "arctic_drafts.json.gz"
GENERATOR = "tests/lookup/data/generate_arctic_drafts.py"

#: The real-text subset: the benchmark's corpus at --files 24 (48 files spread over the
#: standard library, the BPE tokenizer trained on every other one), every second held-out file.
FILES, VOCAB, STREAMS = 24, 8192, 12
#: What `make_proposers` gives its suffix rows (SuffixOptions(max_tree_depth=24,
#: max_cached_requests=10000), vLLM's defaults otherwise) and the benchmark's shape at k = 16.
REAL_TEXT: dict[str, Any] = dict(prompt=256, new=256, k=16, batch=8, max_tree_depth=24,
                 max_cached_requests=10000, max_spec_factor=1.0, min_token_prob=0.1)
#: Seeded random streams: (seed, max_cached_requests, max_spec_factor, min_token_prob, k);
#: seed 0 is the former live test's stream and options.
RANDOM = [(0, 4, 1.0, 0.1, 16), (1, 1, 1.0, 0.1, 16), (2, 4, 2.0, 0.0, 16),
          (3, -1, 0.5, 0.25, 16), (4, 0, 1.0, 0.1, 16), (5, 2, 1.5, 0.05, 16),
          (6, 3, 1.0, 0.1, 5)]
RANDOM_DEPTH = 16


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


def arctic() -> tuple[Any, dict[str, Any]]:
    """arctic-inference's SuffixDecodingCache class, built if needed, and its BUILD.json."""
    builder = _load(ROOT / "benchmarks" / "build_arctic_suffix.py", "build_arctic_suffix")
    folder = builder.ensure_built()
    sys.path.insert(0, str(folder))
    from arctic_inference.suffix_decoding import SuffixDecodingCache

    return SuffixDecodingCache, json.loads((folder / "BUILD.json").read_text())


def f32_decimal(x: float) -> float:
    """The shortest decimal that reads back as the same float32 (arctic's scores are float32)."""
    import numpy as np

    return float(repr(np.float32(x)).removeprefix("np.float32(").removesuffix(")"))


def speculator(cache: Any, *, k: int, max_spec_factor: float, min_token_prob: float,
               tree: bool) -> Any:
    """speculate(req, context) for the replay drivers: the draft, and the call's record
    [token ids, parents, score (float32), match length]."""

    def speculate(req: Any, context: list[int]) -> tuple[Any, list[Any]]:
        d = cache.speculate(req, context, max_spec_tokens=k, max_spec_factor=max_spec_factor,
                            min_token_prob=min_token_prob, use_tree_spec=tree)
        tokens, parents = list(map(int, d.token_ids)), list(map(int, d.parents))
        return (tokens, parents), [tokens, parents, f32_decimal(d.score), int(d.match_len)]

    return speculate


# ------------------------------------------------------------------------------ real text
def real_text_streams(length: int) -> tuple[list[list[int]], dict[str, Any], int]:
    """The benchmark's streams (its own file choice and tokenizer), cut to `length` tokens;
    their provenance; the tokenizer's vocabulary size."""
    import tokenizers

    bench = _load(ROOT / "benchmarks" / "bench_real_text.py", "bench_real_text")
    stdlib = Path(sysconfig.get_paths()["stdlib"])
    files = bench.stdlib_files(FILES)
    train, held_out = files[0::2], files[1::2]
    tokenizer = bench.train_tokenizer(train, VOCAB)
    chosen: list[tuple[Path, str, list[int]]] = []
    for f in held_out[::2]:
        text = f.read_text(encoding="utf-8", errors="replace")
        ids = tokenizer.encode(text).ids
        if len(ids) >= length:
            chosen.append((f, text, ids[:length]))
    chosen = chosen[:STREAMS]
    assert len(chosen) == STREAMS, f"only {len(chosen)} files have {length} tokens"
    rel = lambda p: str(p.relative_to(stdlib))  # noqa: E731
    source = {
        "corpus": f"benchmarks/bench_real_text.py: stdlib_files({FILES}), the tokenizer trained "
                  "on every other file, every second one of the other files",
        "python": platform.python_version(), "stdlib": str(stdlib),
        "files": [rel(f) for f, _, _ in chosen],
        "files_sha256": [hashlib.sha256(t.encode()).hexdigest() for _, t, _ in chosen],
        "tokenizer": {"library": f"tokenizers {tokenizers.__version__}",
                      "kind": "ByteLevelBPETokenizer", "requested_vocab": VOCAB,
                      "vocab_size": tokenizer.get_vocab_size(), "min_frequency": 2,
                      "trained_on": [rel(f) for f in train]},
    }
    return [ids for _, _, ids in chosen], source, tokenizer.get_vocab_size()


def record_real_text(cache_class: Any) -> dict[str, Any]:
    from tests.support.suffix_replay import Settings, replay

    settings = Settings(**REAL_TEXT)
    streams, source, vocab = real_text_streams(settings.stream_length)
    out: dict[str, Any] = {"settings": settings.as_dict(), "source": source, "streams": streams}
    for mode in ("chain", "tree"):
        cache = cache_class(max_tree_depth=settings.max_tree_depth,
                            max_cached_requests=settings.max_cached_requests)
        speculate = speculator(cache, k=settings.k, max_spec_factor=settings.max_spec_factor,
                               min_token_prob=settings.min_token_prob, tree=mode == "tree")
        run = replay(cache, speculate, streams, settings)
        mean, steps = benchmark_acceptance(settings, streams, vocab, mode)
        assert (steps, mean) == (run.steps, run.emitted / run.steps), (
            f"{mode}: the replay drives arctic otherwise than bench_real_text.run "
            f"({run.steps} steps, {run.emitted / run.steps}; the benchmark {steps}, {mean})")
        out[mode] = {"calls": run.records, "emitted": run.emitted, "steps": run.steps,
                     "benchmark_mean_accepted_length": mean}
        print(f"real text, {mode}: {len(run.records)} calls, mean accepted length "
              f"{run.emitted / run.steps:.4f} (bench_real_text.run: {mean:.4f})", file=sys.stderr)
    return out


def benchmark_acceptance(settings: Any, streams: list[list[int]], vocab: int,
                         mode: str) -> tuple[float, int]:
    """(mean accepted length, verify steps) of the benchmark's own arctic row on the streams."""
    import torch

    bench = sys.modules["bench_real_text"]
    torch.set_num_threads(1)
    s = settings
    factory, tree = bench.make_proposers(s.k)[f"suffix {mode} (arctic)"]
    mean, _, steps = bench.run(factory(), tree, streams, vocab, s.prompt, s.new, s.k, s.batch)
    return mean, steps


# ------------------------------------------------------------------------------ random streams
def random_requests(seed: int) -> list[tuple[list[int], list[int]]]:
    """The former live test's recipe: a 40-token motif over 8 tokens repeated 8 times, 15 % of
    tokens replaced at random from 20; three requests of 30 prompt and 170 output tokens, each
    starting 20 tokens after the previous one."""
    rng = random.Random(seed)
    text = [rng.choice([1, 2, 3, 4, 5, 6, 7, 8]) for _ in range(40)] * 8
    text = [t if rng.random() > 0.15 else rng.randrange(20) for t in text]
    return [(text[r * 20 : r * 20 + 30], text[r * 20 + 30 : r * 20 + 200]) for r in range(3)]


def record_random(cache_class: Any, cases: list[tuple[int, int, float, float, int]]
                  ) -> list[dict[str, Any]]:
    from tests.support.suffix_replay import replay_tokens

    out = []
    for seed, cached, factor, prob, k in cases:
        requests = random_requests(seed)
        case: dict[str, Any] = {
            "seed": seed, "requests": requests,
            "options": {"max_tree_depth": RANDOM_DEPTH, "max_cached_requests": cached,
                        "max_spec_factor": factor, "min_token_prob": prob, "k": k}}
        for mode in ("chain", "tree"):
            cache = cache_class(max_tree_depth=RANDOM_DEPTH, max_cached_requests=cached)
            speculate = speculator(cache, k=k, max_spec_factor=factor, min_token_prob=prob,
                                   tree=mode == "tree")
            case[mode] = {"calls": replay_tokens(cache, speculate, requests, RANDOM_DEPTH)}
        out.append(case)
    return out


# ------------------------------------------------------------------------------ the file
def generate() -> dict[str, Any]:
    cache_class, build = arctic()
    return {
        "generated_by": GENERATOR, "arctic_inference": build,
        "python": platform.python_version(),
        "calls": "[token ids, parents, score (arctic's float32, shortest decimal), match length]",
        "real_text": record_real_text(cache_class),
        "random": {"recipe": f"{GENERATOR}: random_requests(seed)",
                   "cases": record_random(cache_class, RANDOM)},
    }


def encode(data: dict[str, Any]) -> bytes:
    return json.dumps(data, separators=(",", ":"), sort_keys=True).encode()


def fuzz(count: int) -> int:
    """specreg's SuffixDrafter against live arctic on `count` more seeded random streams,
    every call; a difference that is not a float32 tie (tests/support/arctic_rule.py) fails."""
    from tests.support.arctic_rule import compare_random_case

    cache_class, _ = arctic()
    ties = 0
    for seed in range(1000, 1000 + count):
        rng = random.Random(seed)
        case = (seed, rng.choice([-1, 0, 1, 2, 4]), rng.choice([0.5, 1.0, 1.5, 2.0]),
                rng.choice([0.0, 0.05, 0.1, 0.25]), rng.choice([4, 8, 16]))
        (recorded,) = record_random(cache_class, [case])
        for mode in ("chain", "tree"):
            ties += len(compare_random_case(recorded, mode, every=1))
    print(f"{count} random streams, chain and tree: every call equal but {ties} float32 ties")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--check", action="store_true",
                        help="regenerate in memory and compare with the committed file")
    parser.add_argument("--fuzz", type=int, metavar="N",
                        help="compare specreg with live arctic on N more random streams")
    args = parser.parse_args(argv)
    sys.path[:0] = [str(ROOT), str(ROOT / "plugins")]  # this checkout's specreg and plugins
    if args.fuzz:
        return fuzz(args.fuzz)
    text = encode(generate())
    if args.check:
        fresh, committed = json.loads(text), json.loads(gzip.decompress(OUTPUT.read_bytes()))
        differ = sorted(key for key in fresh.keys() | committed.keys()
                        if fresh.get(key) != committed.get(key))
        # another Python's standard library gives other real-text streams: see "source"
        print(f"{OUTPUT.name}: " + (f"a fresh run differs in {', '.join(differ)}" if differ
                                    else "reproduced exactly"))
        return 1 if differ else 0
    with gzip.GzipFile(OUTPUT, "wb", mtime=0) as out:
        out.write(text)
    print(f"wrote {OUTPUT} ({OUTPUT.stat().st_size} bytes)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
