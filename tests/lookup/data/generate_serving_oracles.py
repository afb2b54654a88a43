"""Generates `serving_oracles.json.gz` beside it: what the real systems draft on the serving
traces of `tests/support/serving_traces.py` (the 1,000 seeded traces and the named scenarios).

- suffix: vLLM 0.33's own `SuffixDecodingProposer` (vllm/v1/spec_decode/suffix_decoding.py)
  over arctic-inference's `SuffixDecodingCache`, built from its sdist for CPU by
  `benchmarks/build_arctic_suffix.py` (its version, checksum and upstream commit are recorded).
- ngram: vLLM 0.33's own `NgramProposer` (vllm/v1/spec_decode/ngram_proposer.py) with its numba
  kernel; numba comes from a wheel installed into a cache folder. Where it cannot be installed
  the kernel's Python body runs instead (`py_func`); the data records which ran.

Each proposer is called exactly as vLLM's GPU model runner calls it, on the batch the trace
builds, and its drafts steer the trace (a row samples the drafts it proposed as far as they
agree with the target's tokens). The tests replay each trace with these committed drafts
steering it and compare specreg's custom_class proposer with them, without vLLM or arctic.

    python tests/lookup/data/generate_serving_oracles.py [--traces 1000]

Run it from the repository root with specreg's Python: it builds (once) the pinned framework
environment of tests/adapters (vLLM 0.33.0 on CPU) and re-runs itself inside it.
"""

from __future__ import annotations

import argparse
import gzip
import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parents[2]
OUTPUT = HERE / "serving_oracles.json.gz"
NUMBA_DIR = Path.home() / ".cache" / "specreg" / "oracles" / "numba"
GENERATOR = "tests/lookup/data/generate_serving_oracles.py"


def _load(path: Path, name: str) -> Any:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


# ------------------------------------------------------------------ outside: prepare, re-run
def outside(traces: int) -> int:
    sys.path.insert(0, str(ROOT))
    from tests.adapters.envs import ensure_env

    builder = _load(ROOT / "benchmarks" / "build_arctic_suffix.py", "build_arctic_suffix")
    try:
        arctic = builder.ensure_built()
    except builder.ArcticBuildError as exc:
        print(f"cannot build arctic-inference's suffix tree: {exc}", file=sys.stderr)
        return 1
    env = ensure_env()
    if not (NUMBA_DIR / "numba").exists():
        done = subprocess.run([str(env.python), "-m", "pip", "install", "--only-binary", ":all:",
                               "--target", str(NUMBA_DIR), "numba"], capture_output=True,
                              text=True)
        if done.returncode != 0:
            print("numba could not be installed; vLLM's ngram kernel runs as Python:\n"
                  + done.stderr[-400:], file=sys.stderr)
    run_env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    paths = [arctic, *([NUMBA_DIR] if (NUMBA_DIR / "numba").exists() else []), ROOT]
    run_env.update(PYTHONPATH=os.pathsep.join(map(str, paths)), PYTHONNOUSERSITE="1",
                   CUDA_VISIBLE_DEVICES="")
    return subprocess.run([str(env.python), __file__, "--inside", "--traces", str(traces)],
                          env=run_env).returncode


# ------------------------------------------------------------------ inside the framework env
def vllm_config(config: Any) -> SimpleNamespace:
    """The parts of a VllmConfig the two proposers read."""
    spec = SimpleNamespace(
        num_speculative_tokens=config.k, prompt_lookup_min=config.min_ngram,
        prompt_lookup_max=config.max_ngram,
        suffix_decoding_max_tree_depth=config.max_tree_depth,
        suffix_decoding_max_cached_requests=config.max_cached_requests,
        suffix_decoding_max_spec_factor=config.max_spec_factor,
        suffix_decoding_min_token_prob=config.min_token_prob)
    return SimpleNamespace(
        speculative_config=spec, model_config=SimpleNamespace(max_model_len=config.max_model_len),
        scheduler_config=SimpleNamespace(max_num_seqs=config.max_num_reqs),
        parallel_config=SimpleNamespace(tensor_parallel_size=1))


def record(trace: Any, method: str) -> dict[str, Any]:
    """The drafts of vLLM's `method` proposer at every step of `trace`, as it steers it."""
    from vllm.v1.spec_decode.ngram_proposer import NgramProposer
    from vllm.v1.spec_decode.suffix_decoding import SuffixDecodingProposer

    from tests.support.serving_traces import replay

    config = trace.config
    steps: list[list[list[int]]] = []
    near_ties: list[list[Any]] = []
    if method == "suffix":
        suffix = SuffixDecodingProposer(vllm_config(config))
        calls = _watch_ties(suffix.suffix_cache)

        def propose(batch: Any, sampled: list[list[int]]) -> list[list[int]]:
            calls.clear()
            steps.append([list(map(int, d)) for d in suffix.propose(config.k, batch, sampled)])
            rows = batch.req_id_to_index
            near_ties.extend([len(steps) - 1, rows[req_id], *tie] for req_id, tie in calls)
            return steps[-1]
    else:
        ngram = NgramProposer(vllm_config(config))

        def propose(batch: Any, sampled: list[list[int]]) -> list[list[int]]:
            drafts = ngram.propose(config.k, sampled, batch.num_tokens_no_spec,
                                   batch.token_ids_cpu)
            steps.append([list(map(int, d)) for d in drafts])
            return steps[-1]
    replay(trace, propose)
    out: dict[str, Any] = {"steps": len(steps), "drafts": steps}
    if near_ties:
        out["near_ties"] = near_ties
    return out


def _watch_ties(cache: Any) -> list[tuple[Any, list[Any]]]:
    """Wraps `cache.speculate` to list the calls whose request tree and global tree drafted
    different tokens with float32 scores within 1e-6: [local tokens, global tokens, local
    score, global score] by request id (arctic takes the local draft on a tie)."""
    calls: list[tuple[Any, list[Any]]] = []
    original = cache.speculate

    def speculate(req_id: Any, context: Any, max_spec_tokens: int, max_spec_factor: float,
                  min_token_prob: float) -> Any:
        args = (context, max_spec_tokens, max_spec_factor, 0.0, min_token_prob, False)
        local = cache._local_trees[req_id].speculate_ndarray(*args)
        other = cache._global_tree.speculate_ndarray(*args)
        if (abs(local.score - other.score) <= 1e-6
                and list(local.token_ids) != list(other.token_ids)):
            calls.append((req_id, [list(local.token_ids), list(other.token_ids),
                                   local.score, other.score]))
        return original(req_id, context, max_spec_tokens=max_spec_tokens,
                        max_spec_factor=max_spec_factor, min_token_prob=min_token_prob)

    cache.speculate = speculate
    return calls


def empty_context_calls() -> list[dict[str, Any]]:
    """vLLM's ngram proposer on rows with no tokens, at the model's length and one short of it."""
    import numpy as np
    from vllm.v1.spec_decode.ngram_proposer import NgramProposer

    from tests.support.serving_traces import TraceConfig

    config = TraceConfig(k=3, max_tree_depth=24, max_cached_requests=-1, max_spec_factor=1.0,
                         min_token_prob=0.1, min_ngram=1, max_ngram=3, max_num_reqs=4,
                         max_model_len=8)
    rows = [[], [1, 2, 1, 2, 1, 2, 1, 2], [1, 2, 1, 2, 1, 2, 1], [5, 1, 2, 1]]
    tokens = np.full((4, 8), 3, dtype=np.int32)
    for i, row in enumerate(rows):
        tokens[i, : len(row)] = row
    lengths = np.array([len(r) for r in rows], dtype=np.int32)
    sampled = [[7], [2], [1], [1]]
    drafts = NgramProposer(vllm_config(config)).propose(3, sampled, lengths, tokens)
    return [{"config": config.as_dict(), "rows": rows, "sampled": sampled,
             "drafts": [list(map(int, d)) for d in drafts]}]


def _ngram_kernel() -> str:
    """numba's version, or (numba absent) a stand-in whose jit decorators return the function
    itself, so vLLM's kernel runs as its Python body."""
    try:
        import numba
    except ImportError:
        import types

        def jit(*args: Any, **kwargs: Any) -> Any:
            return args[0] if args and callable(args[0]) else (lambda f: f)

        stand_in = types.ModuleType("numba")
        stand_in.__dict__.update(jit=jit, njit=jit, prange=range, get_num_threads=lambda: 1,
                                 set_num_threads=lambda n: None)
        sys.modules["numba"] = stand_in
        return "python (vLLM's kernel body; numba not installed)"
    return f"numba {numba.__version__}"


def inside(traces: int) -> int:
    kernel = _ngram_kernel()
    import arctic_inference.suffix_decoding
    import vllm
    from vllm.v1.spec_decode import ngram_proposer

    from tests.support.serving_traces import SCENARIOS, make_trace

    build = json.loads((Path(arctic_inference.suffix_decoding.__file__).parents[2]
                        / "BUILD.json").read_text())
    data: dict[str, Any] = {
        "generated_by": GENERATOR, "vllm": vllm.__version__, "ngram_kernel": kernel,
        "ngram_proposer": ngram_proposer.__name__, "arctic_inference": build,
        "trace_module": "tests/support/serving_traces.py",
        "scenarios": {}, "traces": {"suffix": [], "ngram": []},
        "ngram_calls": empty_context_calls(),
    }
    for name, trace in SCENARIOS.items():
        data["scenarios"][name] = {m: record(trace, m) for m in ("suffix", "ngram")}
    for seed in range(traces):
        trace = make_trace(seed)
        for method in ("suffix", "ngram"):
            data["traces"][method].append(record(trace, method))
        if seed % 100 == 99:
            print(f"{seed + 1} traces", file=sys.stderr, flush=True)
    text = json.dumps(data, separators=(",", ":"), sort_keys=True)
    with gzip.GzipFile(OUTPUT, "wb", mtime=0) as out:
        out.write(text.encode())
    print(f"wrote {OUTPUT} ({OUTPUT.stat().st_size} bytes)")
    return 0


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--traces", type=int, default=1000)
    parser.add_argument("--inside", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    return inside(args.traces) if args.inside else outside(args.traces)


if __name__ == "__main__":
    sys.exit(main())
