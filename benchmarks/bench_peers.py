"""specreg beside the frameworks' own CPU code for the same job: same inputs, one run, one process.

    python benchmarks/bench_peers.py                      # every comparison
    python benchmarks/bench_peers.py --only filters       # filters | ngram | suffix (comma list)

Each comparison prints, after checking that both sides give the same answer on the inputs,

    PEER <job> / <peer>: specreg .. ms, <peer> .. ms (<what was timed>) -> <ratio>x the peer

(`benchmarks/floors.py`; target: ratio <= 1.0, specreg at or below the peer's time), or
`PEER ...: absent (<why>)` when the peer cannot run here: a missing peer is reported, never
skipped silently. Where the ratio is above 1, the script profiles specreg's side (torch.profiler
for torch code, cProfile for Python code), writes the table to
`benchmarks/results/profiles/peer-*.txt` and prints `BOUND <job>: <what bounds it>`.
Times are each side's fastest of `--repeats` calls taken in turn, in the thread's CPU time with
one torch thread (`floors.interleaved_best`).

The comparisons:

- *filters* (in the pinned framework environment, `tests/adapters/envs.py`; never built here
  unless `--build-env`): 64 rows of V 32768 (logits 4 * randn, temperature 0.8).
  vLLM: `apply_top_k_top_p_pytorch(logits / T, k, p, allow_cpu_sync=True)`, the torch path
  vLLM's CPU platform runs for `apply_top_k_top_p` (`vllm/v1/sample/ops/topk_topp_sampler.py`;
  its Triton branch is for GPUs), against specreg's filter, `gathered_row_stats` under the
  `vllm` filter order (its shift, threshold and kept mass: the kept set plus its normaliser).
  Same kept set checked row by row first.
  SGLang: its sampler's torch path, `softmax(logits / T)` then
  `top_k_top_p_min_p_sampling_from_probs_torch` (`sglang/srt/layers/sampler.py`, with
  `max_top_k` as its `SamplingBatchInfo` sets it), one token per row, against specreg's
  `draft_sampling.sample_rows` under the `sglang` order (the filtered q row and one token per
  row, keyed). Same kept set checked first (SGLang's `return_filtered_probs` against q > 0).
- *ngram* (same environment, plus numba, which vLLM's ngram proposer needs and the environment
  lacks: `--numba` installs vLLM's pin from wheels only into `~/.cache/specreg/numba-<ver>`,
  reported absent when that fails): vLLM's `NgramProposer.propose` (numba) against specreg's
  ngram drafter behind vLLM's own `custom_class` seam
  (`specreg.adapters.vllm_proposers.ngram`), both called as vLLM's runner calls them, on 64
  standard-library files as word-level token ids in a [64, 4096] int32 `token_ids_cpu`,
  prompt_lookup 1..4, k 4. Same drafts checked for every row first. The same numba serves
  specreg's compiled ngram path, so both sides run compiled code; the line says which path
  specreg ran (numba, or torch where numba does not import).
- *suffix* (this interpreter, with arctic-inference's suffix tree built from its sdist by
  `build_arctic_suffix.py`): specreg's `SuffixDrafter` against arctic-inference's
  `SuffixDecodingCache` through the API vLLM's suffix proposer drives (start_request,
  add_active_response, speculate, stop_request), on the real-text streams of
  `bench_real_text.py` (24 standard-library files, BPE, 256 prompt tokens and 384 generated,
  8 requests at a time, depth 24, k 16). The calls are recorded once (each step adds the tokens
  specreg's drafts would have emitted), then replayed identically on both: update time (start,
  add, stop) and propose time (speculate) are reported apart, with the share of identical drafts
  and each side's accepted drafts on the replay.
"""

from __future__ import annotations

import argparse
import cProfile
import io
import os
import pstats
import re
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "benchmarks"))
sys.path.insert(0, str(ROOT))
from floors import PEER_LINE, PROFILES, absent_line, interleaved_best, peer_line  # noqa: E402

#: The numba vLLM 0.33 pins (its metadata: numba==0.65.0), and the llvmlite that numba needs.
NUMBA_PINS = ("numba==0.65.0", "llvmlite>=0.47,<0.48")
NUMBA_DIR = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "specreg" / \
    "numba-0.65.0"
SECTIONS = ("filters", "ngram", "suffix")
IN_ENV = ("filters", "ngram")  # the sections that run in the framework environment


# ------------------------------------------------------------------------------ the environment
def framework_env(build: bool) -> tuple[Any, str]:
    """(the built pinned SGLang/vLLM environment, "") or (None, why not). Built only if `build`."""
    from tests.adapters.envs import FrameworkEnv, cache_root, ensure_env, env_key

    if build:
        try:
            return ensure_env(), ""
        except Exception as exc:  # noqa: BLE001 - reported as the peers' absence
            return None, f"the framework environment could not be built: {exc}"
    root = cache_root() / env_key()
    if not (root / "build.json").exists():
        return None, (f"no built SGLang/vLLM environment at {root} (build it once with "
                      "`python tests/adapters/envs.py`, or pass --build-env)")
    return FrameworkEnv(root=root, build_seconds=0.0, overlay=Path()), ""


def numba_path(python: Path, install: bool) -> tuple[Path | None, str]:
    """(a folder to add to the path, or None when the environment has numba, "") or
    (None, why numba is absent). Installs `NUMBA_PINS` from wheels only when asked."""
    probe = subprocess.run([str(python), "-c", "import numba"], capture_output=True, env={
        **os.environ, "PYTHONNOUSERSITE": "1", "PYTHONPATH": ""})
    if probe.returncode == 0:
        return None, ""
    if (NUMBA_DIR / "numba" / "__init__.py").exists():
        return NUMBA_DIR, ""
    if not install:
        return None, ("numba is not in the framework environment and not installed in "
                      f"{NUMBA_DIR} (pass --numba to install {NUMBA_PINS[0]} from wheels)")
    staging = NUMBA_DIR.with_name(NUMBA_DIR.name + ".installing")
    done = subprocess.run(
        [str(python), "-m", "pip", "install", "--no-input", "--no-deps", "--only-binary=:all:",
         "--target", str(staging), *NUMBA_PINS], capture_output=True, text=True)
    if done.returncode != 0:
        return None, (f"pip could not install {' '.join(NUMBA_PINS)} from wheels "
                      f"(exit {done.returncode}): {done.stderr.strip()[-300:]}")
    staging.rename(NUMBA_DIR)
    return NUMBA_DIR, ""


def run_in_env(args: argparse.Namespace, sections: list[str]) -> int:
    """Run `sections` of this script in the framework environment; print its lines."""
    names = {"filters": FILTER_ROWS, "ngram": [NGRAM_ROW]}
    env, why = framework_env(args.build_env)
    if env is None:
        for section in sections:
            for row in names[section]:
                print(absent_line(row, why))
        return 0
    from tests.adapters.envs import write_overlay

    extra_path: list[str] = []
    if "ngram" in sections:
        folder, why_numba = numba_path(env.python, args.numba)
        if why_numba:
            print(absent_line(NGRAM_ROW, why_numba))
            sections = [s for s in sections if s != "ngram"]
        elif folder is not None:
            extra_path.append(str(folder))
    if not sections:
        return 0
    with tempfile.TemporaryDirectory() as tmp:
        overlay = write_overlay(Path(tmp))  # this checkout's entry points, outside the cache
        child = type(env)(root=env.root, build_seconds=0.0, overlay=overlay)
        variables = child.subprocess_env(SPECREG_PEERS_CHILD="1")
        variables["PYTHONPATH"] = os.pathsep.join([variables["PYTHONPATH"], *extra_path])
        argv = [str(child.python), __file__, "--only", ",".join(sections),
                "--repeats", str(args.repeats)]
        done = subprocess.run(argv, env=variables, stdout=subprocess.PIPE, text=True)
    print(done.stdout, end="", flush=True)
    if done.returncode != 0:  # the rows it did not reach are absent, with the reason
        printed = {m["name"] for m in PEER_LINE.finditer(done.stdout)}
        for row in (r for section in sections for r in names[section] if r not in printed):
            print(absent_line(row, f"the run in the framework environment exited with "
                                   f"{done.returncode} before this row; its traceback is on stderr"))
    return done.returncode


# ------------------------------------------------------------------------------ shared helpers
def torch_bound(slug: str, fn: Callable[[], object], calls: int = 3) -> str:
    """Profile `fn` (torch.profiler, CPU ops by self time) into a file; the leading entries."""
    import torch

    fn()
    with torch.profiler.profile(activities=[torch.profiler.ProfilerActivity.CPU]) as prof:
        for _ in range(calls):
            fn()
    events = sorted(prof.key_averages(), key=lambda e: e.self_cpu_time_total, reverse=True)
    total = sum(e.self_cpu_time_total for e in events) or 1.0
    ops = sum(e.count for e in events) // calls
    path = _profile_path(slug)
    path.write_text(f"{slug}: torch.profiler, {calls} calls, torch {torch.__version__}, "
                    f"{torch.get_num_threads()} thread(s)\n"
                    + prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=25)
                    + "\n", encoding="utf-8")  # fmt: skip
    top = ", ".join(f"{e.key} {100 * e.self_cpu_time_total / total:.0f}%" for e in events[:4])
    return f"{top}; {ops} torch ops a call (torch.profiler: {path.relative_to(ROOT)})"


def python_bound(slug: str, profile: cProfile.Profile) -> str:
    """A filled cProfile into a file; the functions with the most own time."""
    out = io.StringIO()
    stats = pstats.Stats(profile, stream=out).sort_stats("tottime")
    stats.print_stats(25)
    path = _profile_path(slug)
    path.write_text(f"{slug}: cProfile, own time first\n{out.getvalue()}", encoding="utf-8")
    total = stats.total_tt or 1.0  # type: ignore[attr-defined]
    rows = sorted(stats.stats.items(), key=lambda kv: kv[1][2], reverse=True)  # type: ignore[attr-defined]
    top = ", ".join(f"{_where(func)} {100 * st[2] / total:.0f}%" for func, st in rows[:4])
    return f"{top} (cProfile, own time: {path.relative_to(ROOT)})"


def _where(func: tuple[str, int, str]) -> str:
    file, line, name = func
    return name if file == "~" else f"{Path(file).name}:{line}({name})"


def _profile_path(slug: str) -> Path:
    PROFILES.mkdir(parents=True, exist_ok=True)
    return PROFILES / ("peer-" + re.sub(r"[^a-z0-9]+", "-", slug.lower()).strip("-") + ".txt")


def report(name: str, ours: Callable[[], object], peer: str, theirs: Callable[[], object],
           what: str, repeats: int, bound: Callable[[], str], why: str = "") -> None:
    best = interleaved_best({"specreg": ours, "peer": theirs}, repeats)
    print(peer_line(name, best["specreg"], peer, best["peer"], what), flush=True)
    if best["specreg"] > best["peer"]:
        print(f"BOUND {name}: {bound()}{'; ' + why if why else ''}", flush=True)


# ------------------------------------------------------------------------------ filters
VLLM_FILTER = "vLLM apply_top_k_top_p (torch path)"
SGLANG_SAMPLER = "SGLang top_k_top_p_min_p_sampling_from_probs_torch"
VLLM_SETS = {"top_k 50": (50, 1.0, 0.0), "top_p 0.9": (0, 0.9, 0.0),
             "top_k 50, top_p 0.9": (50, 0.9, 0.0)}
SGLANG_SETS = {"top_k 50": (50, 1.0, 0.0), "top_p 0.9": (0, 0.9, 0.0),
               "top_k 50, top_p 0.9, min_p 0.05": (50, 0.9, 0.05)}
FILTER_ROWS = [f"filter, {s} / {VLLM_FILTER}" for s in VLLM_SETS] + \
    [f"filter and draw, {s} / {SGLANG_SAMPLER}" for s in SGLANG_SETS]


def filters(repeats: int, rows: int = 64, vocab: int = 32768) -> None:
    import torch
    from sglang.srt.layers import sampler as sglang_sampler
    from sglang.srt.sampling.sampling_params import TOP_K_ALL
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p_pytorch

    from specreg.step.draft_sampling import filtered_q, sample_rows
    from specreg.kernels.filtering import gathered_row_stats
    from specreg.contract.filter_order import FILTER_RULES
    from specreg.contract.sampling_params import SamplingParams

    torch.set_num_threads(1)  # the frameworks' imports may have raised it
    logits = 4.0 * torch.randn(rows, vocab, generator=torch.Generator().manual_seed(0))
    every = torch.arange(rows)
    temperature = torch.full((rows,), 0.8)
    print(f"filters: {rows} rows of V={vocab} (4 * randn logits, temperature 0.8), "
          f"torch {torch.__version__}, {torch.get_num_threads()} thread(s), min of {repeats}")
    for label, (k, p, _) in VLLM_SETS.items():
        name = f"filter, {label} / {VLLM_FILTER}"
        params = SamplingParams.of(rows, temperature=0.8, top_k=k, top_p=p)
        top_k = None if k == 0 else torch.full((rows,), k, dtype=torch.long)
        top_p = None if p == 1.0 else torch.full((rows,), p)

        def theirs(top_k=top_k, top_p=top_p):  # vLLM's sampler owns the scaled logits
            return apply_top_k_top_p_pytorch(torch.div(logits, temperature[:, None]), top_k,
                                             top_p, allow_cpu_sync=True)

        def ours(params=params):
            return gathered_row_stats(logits, every, params.temperature, params.top_k,
                                      params.top_p, params.min_p, probabilities=False,
                                      rule=FILTER_RULES["vllm"])

        kept_peer = theirs() > float("-inf")
        kept_ours = torch.div(logits, temperature[:, None]) >= ours().threshold[:, None]
        differ = int((kept_peer != kept_ours).any(-1).sum())
        if differ:
            print(absent_line(name, f"the kept sets differ on {differ} of {rows} rows"))
            continue
        report(name, ours, VLLM_FILTER, theirs,
               f"same kept set on all {rows} rows, {int(kept_ours.sum())} tokens; specreg also "
               "returns the kept mass", repeats, lambda ours=ours, label=label: torch_bound(f"vllm filter {label}", ours))
    positions = torch.arange(rows)
    keys = torch.arange(rows)
    for label, (k, p, m) in SGLANG_SETS.items():
        name = f"filter and draw, {label} / {SGLANG_SAMPLER}"
        params = SamplingParams.of(rows, temperature=0.8, top_k=k, top_p=p, min_p=m)
        top_ks = torch.full((rows,), k if k else TOP_K_ALL, dtype=torch.int32)
        top_ps, min_ps = torch.full((rows,), p), torch.full((rows,), m)
        max_top_k = k if k else None  # SamplingBatchInfo: set when every request has a top-k

        def theirs(top_ks=top_ks, top_ps=top_ps, min_ps=min_ps, m=m, max_top_k=max_top_k,
                   filtered=False):
            probs = sglang_sampler.sampler_softmax(torch.div(logits, temperature[:, None]))
            return sglang_sampler.top_k_top_p_min_p_sampling_from_probs_torch(
                probs, top_ks, top_ps, min_ps, m > 0, None, positions,
                return_filtered_probs=filtered, max_top_k=None if filtered else max_top_k)

        def ours(params=params):
            return sample_rows(logits, params, keys=keys, positions=positions,
                               filter_order="sglang")

        _, weights, order, _ = theirs(filtered=True)
        kept_peer = torch.zeros(rows, vocab, dtype=torch.bool).scatter_(
            1, order.long(), weights > 0)
        kept_ours = filtered_q(logits, params, every, filter_order="sglang") > 0
        drawn = ours().tokens
        differ = int((kept_peer != kept_ours).any(-1).sum())
        outside = int((~kept_ours.gather(1, drawn[:, None])).sum()) + int(
            (~kept_peer.gather(1, theirs().long()[:, None])).sum())
        if differ or outside:
            print(absent_line(name, f"the kept sets differ on {differ} of {rows} rows "
                                    f"({outside} tokens drawn outside them)"))
            continue
        report(name, ours, SGLANG_SAMPLER, theirs,
               f"softmax(logits / T), filter and one token per row; same kept set on all {rows} "
               f"rows, {int(kept_ours.sum())} tokens; specreg also returns the filtered q rows",
               repeats, lambda ours=ours, label=label: torch_bound(f"sglang {label}", ours),
               why="specreg returns the filtered q row [b, V] the with-draft verify rules read "
               "(an exp and masks over every token, where SGLang writes nothing after its "
               "softmax), computes its row statistics in 12-row chunks (some 1,550 small torch "
               "ops for 64 rows) and keys its draw on the random stream (some 680 ops); SGLang's "
               "top-k path takes torch.topk of max_top_k columns and samples among them")


# ------------------------------------------------------------------------------ ngram
NGRAM_ROW = "ngram drafter behind custom_class / vLLM NgramProposer (numba)"


def word_histories(rows: int, width: int, seed: int = 0) -> tuple[Any, Any]:
    """token_ids_cpu int32 [rows, width] of standard-library files as word-level token ids
    (regex words and punctuation, ids in order of first appearance), and lengths in
    [width / 4, 3 width / 4)."""
    import sysconfig

    import numpy as np

    files = sorted(Path(sysconfig.get_paths()["stdlib"]).glob("*.py"))
    vocab: dict[str, int] = {}
    tokens = np.zeros((rows, width), dtype=np.int32)
    row = 0
    for f in files:
        words = re.findall(r"\w+|[^\w\s]", f.read_text(encoding="utf-8", errors="replace"))
        if len(words) < 3 * width // 4:
            continue
        tokens[row, : min(width, len(words))] = [vocab.setdefault(w, len(vocab))
                                                 for w in words[:width]]
        row += 1
        if row == rows:
            break
    lengths = np.random.default_rng(seed).integers(width // 4, 3 * width // 4, size=rows)
    return tokens, lengths.astype(np.int32)


def ngram(repeats: int, rows: int = 64, width: int = 4096, k: int = 4) -> None:
    from types import SimpleNamespace

    import numba
    import torch
    from specreg_lookup.kernels.ngram_match import numba_impl
    from vllm.v1.spec_decode.ngram_proposer import NgramProposer

    from specreg.adapters.vllm_proposers import proposer_class

    def config(k: int) -> SimpleNamespace:  # the fields vLLM's proposers read
        return SimpleNamespace(
            speculative_config=SimpleNamespace(prompt_lookup_min=1, prompt_lookup_max=4,
                                               num_speculative_tokens=k),
            model_config=SimpleNamespace(max_model_len=width),
            scheduler_config=SimpleNamespace(max_num_seqs=rows),
            parallel_config=SimpleNamespace(tensor_parallel_size=1))

    vllm = NgramProposer(config(k))
    # vLLM's propose sets numba's threads to 1 and back to what they were; with numba's OpenMP
    # layer that is torch's OpenMP count too, so both start at 1 (vLLM runs 1 numba thread)
    numba.set_num_threads(1)
    torch.set_num_threads(1)
    ours = proposer_class("ngram")(config(k), draft_config={"min_ngram": 1, "max_ngram": 4})
    sampled = [[1]] * rows  # every request decoding
    tokens, lengths = word_histories(rows, width)
    checked = drafted = 0
    for seed in range(4):  # drafts agree on four draws of lengths (and on the timed one)
        _, cut = word_histories(rows, width, seed)
        want = vllm.propose(k, sampled, cut, tokens)
        got = ours.propose(sampled, cut, tokens)
        bad = [i for i in range(rows) if want[i] != got[i]]
        if bad:
            print(absent_line(NGRAM_ROW, f"drafts differ on rows {bad[:8]}"))
            return
        checked += rows
        drafted += sum(1 for d in want if d)
    print(f"ngram: {rows} requests, token_ids_cpu [{rows}, {width}] int32, lengths "
          f"{int(lengths.min())}..{int(lengths.max())} ({int(lengths.sum())} tokens), "
          f"prompt_lookup 1..4, k {k}; numba {numba.__version__} ({numba.threading_layer()} "
          f"layer, {numba.get_num_threads()} thread), torch {torch.get_num_threads()} thread; "
          f"specreg's path: {'numba' if numba_impl.kernel() is not None else 'torch'}")
    report(NGRAM_ROW, lambda: ours.propose(sampled, lengths, tokens), "vLLM NgramProposer",
           lambda: vllm.propose(k, sampled, lengths, tokens),
           f"propose(sampled, num_tokens_no_spec, token_ids_cpu) as vLLM's runner calls it; the "
           f"same drafts on {checked} rows ({drafted} with a match)", repeats,
           lambda: torch_bound("vllm ngram", lambda: ours.propose(sampled, lengths, tokens)),
           why="with numba, specreg's compiled pass reads each row once, in place, and the rest "
           "is the seam's and the checks' Python (cProfile it: the torch profile shows little); "
           "without numba its torch path finds the positions after the last token by one "
           "compare and a nonzero over an int64 copy of the [b, W] rows, then runs some 240 "
           "small torch ops a call; vLLM's numba KMP reads each token once in compiled code")


# ------------------------------------------------------------------------------ suffix
ARCTIC = "arctic-inference SuffixDecodingCache"
SUFFIX_ROWS = {"update": f"suffix drafter, update / {ARCTIC}",
               "propose": f"suffix drafter, propose / {ARCTIC}"}


def suffix_calls(files: int, prompt: int, new: int, batch: int, k: int) -> tuple[list, int]:
    """The recorded calls of a greedy replay of the real-text streams, specreg's drafts deciding
    how many tokens each step adds; and the number of speculate calls."""
    from bench_real_text import stdlib_files, train_tokenizer
    from specreg_lookup.drafter import SuffixDrafter
    from specreg_lookup.sizes import SuffixOptions

    found = stdlib_files(files)
    tokenizer = train_tokenizer(found[0::2], 8192)
    streams = []
    for f in found[1::2]:
        ids = tokenizer.encode(f.read_text(encoding="utf-8", errors="replace")).ids
        if len(ids) >= prompt + new + k:
            streams.append(ids[: prompt + new + k])
    drafter = SuffixDrafter(SuffixOptions(max_tree_depth=24, max_cached_requests=10000),
                            num_steps=k)
    calls: list[tuple] = []
    speculations = 0
    for first in range(0, len(streams), batch):
        group = list(range(first, min(first + batch, len(streams))))
        done = {r: prompt for r in group}
        for r in group:
            calls.append(("start", r, streams[r][:prompt]))
            drafter.start_request(r, streams[r][:prompt])
        new_tokens = {r: [streams[r][prompt]] for r in group}  # the first sampled token
        while group:
            for r in list(group):
                calls.append(("add", r, new_tokens[r]))
                drafter.add_active_response(r, new_tokens[r])
                done[r] += len(new_tokens[r])
                if done[r] >= prompt + new:
                    calls.append(("stop", r, None))
                    drafter.stop_request(r)
                    group.remove(r)
                    continue
                context = streams[r][max(0, done[r] - 24): done[r]]
                calls.append(("speculate", r, context))
                speculations += 1
                draft = drafter.speculate(r, context, max_spec_tokens=k).tokens
                ahead = streams[r][done[r]: done[r] + len(draft)]
                accepted = next((i for i, (a, b) in enumerate(zip(draft, ahead, strict=False))
                                 if a != b), min(len(draft), len(ahead)))
                new_tokens[r] = streams[r][done[r]: done[r] + accepted + 1]
    return calls, speculations


def replay(calls: list, make: Callable[[], Any], speculate: Callable[..., list[int]],
           profile: tuple[cProfile.Profile, tuple[str, ...]] | None = None
           ) -> tuple[float, float, list[list[int]]]:
    """(update seconds, propose seconds, the drafts) of one replay on a fresh drafter;
    `profile`: (a cProfile, the call kinds it records)."""
    from floors import clock

    now = clock()
    drafter = make()
    update = propose = 0.0
    drafts = []
    for kind, req, data in calls:
        watch = profile is not None and kind in profile[1]
        if watch:
            profile[0].enable()
        start = now()
        if kind == "speculate":
            drafts.append(speculate(drafter, req, data))
            propose += now() - start
        else:
            if kind == "start":
                drafter.start_request(req, data)
            elif kind == "add":
                drafter.add_active_response(req, data)
            else:
                drafter.stop_request(req)
            update += now() - start
        if watch:
            profile[0].disable()
    return update, propose, drafts


def suffix(repeats: int, k: int = 16) -> None:
    from build_arctic_suffix import ArcticBuildError, ensure_built
    from specreg_lookup.drafter import SuffixDrafter
    from specreg_lookup.sizes import SuffixOptions

    try:
        sys.path.insert(0, str(ensure_built()))
        from arctic_inference.suffix_decoding import SuffixDecodingCache
    except (ArcticBuildError, ImportError, OSError) as exc:
        for row in SUFFIX_ROWS.values():
            print(absent_line(row, f"arctic-inference's suffix tree is not available: {exc}"))
        return
    options = SuffixOptions(max_tree_depth=24, max_cached_requests=10000)
    calls, speculations = suffix_calls(24, 256, 384, 8, k)

    def ours_make() -> Any:
        return SuffixDrafter(options, num_steps=k)

    def ours_speculate(d: Any, req: int, context: list[int]) -> list[int]:
        return d.speculate(req, context, max_spec_tokens=k).tokens

    def arctic_make() -> Any:
        return SuffixDecodingCache(max_tree_depth=options.max_tree_depth,
                                   max_cached_requests=options.max_cached_requests)

    def arctic_speculate(d: Any, req: int, context: list[int]) -> list[int]:
        draft = d.speculate(req, context, max_spec_tokens=k,
                            max_spec_factor=options.max_spec_factor,
                            min_token_prob=options.min_token_prob, use_tree_spec=False)
        return list(draft.token_ids)

    best = {"ours": [float("inf")] * 2, "arctic": [float("inf")] * 2}
    drafts: dict[str, list[list[int]]] = {}
    for _ in range(repeats):
        for side, make, spec in (("ours", ours_make, ours_speculate),
                                 ("arctic", arctic_make, arctic_speculate)):
            update, propose, drafts[side] = replay(calls, make, spec)
            best[side] = [min(best[side][0], update), min(best[side][1], propose)]
    same = sum(a == b for a, b in zip(drafts["ours"], drafts["arctic"], strict=True))
    tokens = sum(len(d) for kind, _, d in calls if kind in ("start", "add"))
    print(f"suffix: {len(calls)} recorded calls ({speculations} speculate, {tokens} tokens "
          f"added), depth 24, k {k}, chain drafts; identical drafts {same}/{speculations} "
          f"({100 * same / speculations:.1f} %); min of {repeats} replays")
    for part, index in (("update", 0), ("propose", 1)):
        what = ("start_request, add_active_response, stop_request over the replay" if index == 0
                else "speculate over the replay")
        name = SUFFIX_ROWS[part]
        ours_s, theirs_s = best["ours"][index], best["arctic"][index]
        print(peer_line(name, ours_s, ARCTIC, theirs_s,
                        f"{what}: {1e6 * ours_s / speculations:.1f} vs "
                        f"{1e6 * theirs_s / speculations:.1f} us a step"), flush=True)
        if ours_s > theirs_s:
            kinds = ("speculate",) if part == "propose" else ("start", "add", "stop")
            profile = cProfile.Profile()
            replay(calls, ours_make, ours_speculate, profile=(profile, kinds))
            print(f"BOUND {name}: {python_bound(f'arctic suffix {part}', profile)}; specreg's "
                  "suffix trees are Python objects walked and updated token by token, arctic's "
                  "a C++ path-compressed tree", flush=True)


# ------------------------------------------------------------------------------ main
def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--only", default=",".join(SECTIONS),
                        help="comma-separated: " + ", ".join(SECTIONS))
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--numba", action="store_true",
                        help=f"install {NUMBA_PINS[0]} from wheels into {NUMBA_DIR} if missing")
    parser.add_argument("--build-env", action="store_true",
                        help="build the pinned SGLang/vLLM environment if it is missing (GBs)")
    args = parser.parse_args()
    sections = [s.strip() for s in args.only.split(",") if s.strip()]
    unknown = sorted(set(sections) - set(SECTIONS))
    if unknown:
        parser.error(f"unknown sections {unknown}; choose from {SECTIONS}")
    import torch

    torch.set_num_threads(1)
    if os.environ.get("SPECREG_PEERS_CHILD"):
        import logging
        import warnings

        warnings.filterwarnings("ignore")
        logging.disable(logging.CRITICAL)
        for section in sections:
            {"filters": filters, "ngram": ngram}[section](args.repeats)
        return 0
    here = [s for s in sections if s in IN_ENV]
    rc = 0
    if here:
        sys.stdout.flush()
        rc = run_in_env(args, here)
        if rc != 0:
            print(f"the framework-environment part exited with {rc}", file=sys.stderr)
    if "suffix" in sections:
        suffix(min(args.repeats, 3))
    return rc  # nonzero: run_cpu.py keeps the stderr with the raw output


if __name__ == "__main__":
    start = time.perf_counter()
    code = main()
    print(f"took {time.perf_counter() - start:.0f} s", file=sys.stderr)
    raise SystemExit(code)
