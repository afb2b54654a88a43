"""Drives vLLM's rejection sampler with and without specreg's `rejection_sampler` substitution
and prints what each computed, as JSON (the test judges it; scipy lives outside this env).

Runs inside the pinned framework environment, loaded through vLLM's own plugin loader (the test
sets SPECREG_VLLM / SPECREG_VLLM_SUBSTITUTE, CUDA_VISIBLE_DEVICES="" and TRITON_INTERPRET=1, so
vLLM's Triton kernels run under the interpreter as oracles). Stdin: {"target": model folder,
"mode": "on" | "off", counts...}. Standard library, torch and vLLM only.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from typing import Any

import torch

V = 64  # vocabulary of the random batches
K = 4  # num_speculative_tokens


# ------------------------------------------------------------------------- vLLM's own objects
def metadata_of(drafts: list[list[int]]) -> Any:
    """vLLM's SpecDecodeMetadata with the runner's layout: per request its target rows, then
    its bonus row."""
    from vllm.v1.spec_decode.metadata import SpecDecodeMetadata

    meta = SpecDecodeMetadata.make_dummy(drafts, torch.device("cpu"))
    target, bonus, row = [], [], 0
    for d in drafts:
        target += list(range(row, row + len(d)))
        bonus.append(row + len(d))
        row += len(d) + 1
    meta.target_logits_indices = torch.tensor(target, dtype=torch.int32)
    meta.bonus_logits_indices = torch.tensor(bonus, dtype=torch.int32)
    meta.logits_indices = torch.arange(row, dtype=torch.int32)
    return meta


def processors_of(requests: list[dict[str, Any]]) -> Any:
    """vLLM's built-in min-p and logit-bias processors holding the batch's requests, as vLLM's
    input batch fills them (BatchUpdate)."""
    from vllm import SamplingParams
    from vllm.v1.sample.logits_processor import (
        LogitBiasLogitsProcessor,
        LogitsProcessors,
        MinPLogitsProcessor,
    )
    from vllm.v1.sample.logits_processor.interface import BatchUpdate

    class _Config:
        class scheduler_config:  # noqa: N801 - the attribute vLLM's processors read
            max_num_seqs = 4096

    procs = [MinPLogitsProcessor(_Config(), torch.device("cpu"), False),
             LogitBiasLogitsProcessor(_Config(), torch.device("cpu"), False)]
    added = [(i, SamplingParams(min_p=r.get("min_p", 0.0),
                                logit_bias={int(t): float(v) for t, v in
                                            (r.get("logit_bias") or {}).items()} or None),
              [], []) for i, r in enumerate(requests)]
    update = BatchUpdate(batch_size=len(requests), removed=[], added=added, moved=[])
    for proc in procs:
        proc.update_state(update)
    return LogitsProcessors(procs)


def sampling_metadata_of(requests: list[dict[str, Any]], drafts: list[list[int]],
                         penalties: dict[str, Any] | None = None,
                         bad_words: dict[int, list[list[int]]] | None = None,
                         with_processors: bool = True) -> Any:
    from vllm.v1.sample.logits_processor import LogitsProcessors
    from vllm.v1.sample.metadata import SamplingMetadata

    b = len(requests)
    temps = torch.tensor([r["temperature"] for r in requests], dtype=torch.float32)
    greedy = temps == 0
    top_k = [r.get("top_k", 0) or V for r in requests]
    top_p = [r.get("top_p", 1.0) for r in requests]
    generators = {}
    for i, r in enumerate(requests):
        if r.get("seed") is not None:
            generators[i] = torch.Generator().manual_seed(int(r["seed"]))
    outputs = penalties["outputs"] if penalties else [[] for _ in requests]
    zeros = torch.zeros(b)
    return SamplingMetadata(
        temperature=None if bool(greedy.all()) else temps,
        all_greedy=bool(greedy.all()), all_random=bool((~greedy).all()),
        top_p=None if all(p == 1.0 for p in top_p) else torch.tensor(top_p),
        top_k=None if all(k == V for k in top_k) else torch.tensor(top_k, dtype=torch.int32),
        generators=generators, max_num_logprobs=None,
        no_penalties=penalties is None,
        prompt_token_ids=None if penalties is None else penalties["prompt"],
        frequency_penalties=zeros if penalties is None else penalties["frequency"],
        presence_penalties=zeros if penalties is None else penalties["presence"],
        repetition_penalties=torch.ones(b) if penalties is None else penalties["repetition"],
        output_token_ids=outputs, allowed_token_ids_mask=None,
        bad_words_token_ids=bad_words or {},
        logitsprocs=processors_of(requests) if with_processors else LogitsProcessors(),
        spec_token_ids=[list(d) for d in drafts],
    )


SAMPLERS: dict[str, Any] = {}


def sampler(kind: str) -> Any:
    """One sampler per kind for the whole run, as a runner keeps its own across steps (the
    substituted one keeps its chain layout while the draft counts stay the same)."""
    from vllm.v1.sample import rejection_sampler as rs
    from vllm.v1.sample.sampler import Sampler
    from vllm.v1.worker import gpu_model_runner

    if kind not in SAMPLERS:
        cls = rs.RejectionSampler if kind == "vllm" else gpu_model_runner.RejectionSampler
        SAMPLERS[kind] = cls(Sampler())
    return SAMPLERS[kind]


# ---------------------------------------------------------------------------- random batches
def random_batch(gen: torch.Generator, *, greedy: bool, extras: bool) -> dict[str, Any]:
    b = int(torch.randint(1, 7, (), generator=gen))
    counts = torch.randint(0, K + 1, (b,), generator=gen).tolist()
    if float(torch.rand((), generator=gen)) < 0.3:
        counts = [max(counts)] * b  # every request the same drafts: vLLM's logits read in place
    if max(counts) == 0:
        counts[0] = 1
    rows = sum(counts) + b
    logits = torch.randn(rows, V, generator=gen) * 3
    drafts, row = [], 0
    for c in counts:
        d = []
        for j in range(c):
            u = float(torch.rand((), generator=gen))
            if u < 0.03:
                d.append(-1)  # vLLM's padding of a position that must be rejected
            elif u < 0.65:
                d.append(int(logits[row + j].argmax()))
            else:
                d.append(int(torch.randint(0, V, (), generator=gen)))
        drafts.append(d)
        row += c + 1
    requests = []
    for _ in range(b):
        r: dict[str, Any] = {"temperature": 0.0}
        if not greedy and float(torch.rand((), generator=gen)) < 0.8:
            r = {"temperature": float(torch.rand((), generator=gen)) * 1.5 + 0.3,
                 "top_k": int(torch.randint(0, 12, (), generator=gen)),
                 "top_p": round(float(torch.rand((), generator=gen)) * 0.6 + 0.4, 3)}
            if float(torch.rand((), generator=gen)) < 0.3:
                r["seed"] = int(torch.randint(0, 2**31, (), generator=gen))
        if greedy and extras:
            r["min_p"] = 0.2  # argmax-invariant: greedy outputs must not change
        requests.append(r)
    penalties = bad_words = None
    if extras:
        prompt = torch.randint(0, V, (b, 5), generator=gen)
        outputs = [torch.randint(0, V, (3,), generator=gen).tolist() for _ in range(b)]
        penalties = {"prompt": prompt, "outputs": outputs,
                     "frequency": torch.rand(b, generator=gen),
                     "presence": torch.rand(b, generator=gen),
                     "repetition": 1 + torch.rand(b, generator=gen)}
        bad_words = {0: [[int(logits[0].argmax())], [1, 2]]}
    return {"logits": logits, "drafts": drafts, "requests": requests,
            "penalties": penalties, "bad_words": bad_words}


def run(kind: str, batch: dict[str, Any], seed: int | None = None, **kw: Any) -> torch.Tensor:
    sm = sampling_metadata_of(batch["requests"], batch["drafts"], batch["penalties"],
                              batch["bad_words"], **kw)
    if seed is not None:
        torch.manual_seed(seed)
    out = sampler(kind)(metadata_of(batch["drafts"]), None, batch["logits"].clone(), sm)
    return out.sampled_token_ids


def accepted_counts(out: torch.Tensor, drafts: list[list[int]]) -> list[int]:
    counts = []
    for row, d in zip(out.tolist(), drafts, strict=True):
        a = 0
        while a < len(d) and row[a] == d[a]:
            a += 1
        counts.append(a)
    return counts


# ------------------------------------------------------------------------------ the checks
def greedy_parity(n: int, seed: int) -> dict[str, Any]:
    """Greedy batches (penalties, bad words and min_p in half of them): vLLM's own forward and
    the substituted one, token for token."""
    gen = torch.Generator().manual_seed(seed)
    equal = differ = padded = uniform = 0
    first_diff = None
    for i in range(n):
        batch = random_batch(gen, greedy=True, extras=i % 2 == 1)
        padded += sum(t == -1 for d in batch["drafts"] for t in d)
        uniform += len({len(d) for d in batch["drafts"]}) == 1
        a, b = run("vllm", batch), run("specreg", batch)
        if torch.equal(a, b):
            equal += 1
        else:
            differ += 1
            first_diff = first_diff or {"vllm": a.tolist(), "specreg": b.tolist(),
                                        "drafts": batch["drafts"]}
    return {"batches": n, "equal": equal, "differ": differ, "padded_drafts": padded,
            "uniform_batches": uniform,
            "first_diff": first_diff}


def logit_bias_greedy(n: int, seed: int) -> dict[str, Any]:
    """Greedy with a logit bias per request: the substituted forward equals vLLM's own on
    logits with the bias already added to every row (verified positions and bonus)."""
    gen = torch.Generator().manual_seed(seed)
    equal = changed = 0
    for _ in range(n):
        batch = random_batch(gen, greedy=True, extras=False)
        for r in batch["requests"]:
            r["logit_bias"] = {int(t): 6.0 for t in torch.randint(0, V, (3,), generator=gen)}
        biased = dict(batch, logits=batch["logits"].clone(),
                      requests=[{"temperature": 0.0} for _ in batch["requests"]])
        row = 0
        for r, d in zip(batch["requests"], batch["drafts"], strict=True):
            for t, v in r["logit_bias"].items():
                biased["logits"][row : row + len(d) + 1, t] += v
            row += len(d) + 1
        mine, oracle = run("specreg", batch), run("vllm", biased)
        equal += int(torch.equal(mine, oracle))
        changed += int(not torch.equal(mine, run("specreg", dict(batch, requests=biased["requests"]))))
    return {"batches": n, "equal": equal, "changed_by_bias": changed}


def same_uniforms(n: int, seed: int) -> dict[str, Any]:
    """Sampled batches of vLLM-supported parameters (temperature, top-k, top-p, seeds), each
    run through vLLM's forward and the substituted one from the same RNG state: the coins are
    vLLM's own uniforms, so acceptance decisions, accepted tokens and the bonus (vLLM's sampler
    in both) must agree; only the correction token is drawn differently."""
    gen = torch.Generator().manual_seed(seed)
    decisions = mismatched = bonus_equal = bonus_total = corrections = corrections_equal = 0
    for i in range(n):
        batch = random_batch(gen, greedy=False, extras=False)
        a, b = run("vllm", batch, seed=1000 + i), run("specreg", batch, seed=1000 + i)
        ca, cb = accepted_counts(a, batch["drafts"]), accepted_counts(b, batch["drafts"])
        for r, d in enumerate(batch["drafts"]):
            decisions += min(ca[r] + 1, len(d))
            mismatched += int(ca[r] != cb[r])
            if ca[r] == cb[r] == len(d):
                bonus_total += 1
                bonus_equal += int(a[r, len(d)] == b[r, len(d)])
            elif ca[r] == cb[r]:
                corrections += 1
                corrections_equal += int(a[r, ca[r]] == b[r, ca[r]])
    return {"batches": n, "decisions": decisions, "mismatched_requests": mismatched,
            "bonus_total": bonus_total, "bonus_equal": bonus_equal,
            "corrections": corrections, "corrections_equal": corrections_equal}


def lossless(samples: int, seed: int) -> dict[str, Any]:
    """Counts of the first two emitted tokens over many identical requests with every sampling
    parameter (min_p and logit bias included), through the substituted forward, for the test's
    chi-square; the expected distributions computed with vLLM's own plain-sampler operations
    (bias, temperature, min-p, then `apply_top_k_top_p`). Scenarios: drafts in the filtered
    support, and a first draft that min-p removes (never acceptable). The negative control is
    the same forward without the min-p and logit-bias processors in the batch state (what vLLM
    builds when the logits-processor seam is not patched)."""
    from vllm.v1.sample.ops.topk_topp_sampler import apply_top_k_top_p

    vocab = 8
    gen = torch.Generator().manual_seed(seed)
    base = torch.randn(3, vocab, generator=gen) * 1.5
    request = {"temperature": 0.8, "top_k": 6, "top_p": 0.9, "min_p": 0.12,
               "logit_bias": {2: 1.5}}

    def expected(row: int, bias: bool = True, min_p: bool = True) -> list[float]:
        z = base[row].clone()
        if bias:
            z[2] += 1.5
        z = z / request["temperature"]
        if min_p:
            p = z.softmax(-1)
            z = z.masked_fill(p < p.max() * request["min_p"], float("-inf"))
        z = apply_top_k_top_p(z[None], torch.tensor([request["top_k"]]),
                              torch.tensor([request["top_p"]]))[0]
        return z.softmax(-1).tolist()

    p0 = expected(0)
    order = sorted(range(vocab), key=lambda t: -p0[t])
    removed = [t for t in range(vocab) if p0[t] == 0 and expected(0, min_p=False)[t] > 0]
    scenarios = {"in_support": [order[0], order[1]],
                 "removed_by_min_p": [removed[0] if removed else order[-1], order[0]],
                 "control_without_processors": [order[0], order[1]]}
    out: dict[str, Any] = {"expected": {"p0": p0, "p1": expected(1),
                                        "p0_without_bias": expected(0, bias=False),
                                        "p0_without_min_p": expected(0, min_p=False)},
                           "removed_by_min_p": removed, "scenarios": {}}
    chunk = 4000
    torch.manual_seed(seed)
    for name, drafts in scenarios.items():
        control = name.startswith("control")
        first = torch.zeros(vocab, dtype=torch.long)
        second = torch.zeros(vocab, dtype=torch.long)
        for _ in range(max(1, (samples // 4 if control else samples) // chunk)):
            batch = {"logits": base.repeat(chunk, 1), "drafts": [list(drafts)] * chunk,
                     "requests": [dict(request)] * chunk, "penalties": None, "bad_words": None}
            toks = run("specreg", batch, with_processors=not control)
            first += torch.bincount(toks[:, 0].long(), minlength=vocab)
            after = toks[:, 1][toks[:, 0] == drafts[0]].long()
            second += torch.bincount(after, minlength=vocab)
        out["scenarios"][name] = {"drafts": drafts, "first": first.tolist(),
                                  "second_after_draft": second.tolist()}
    return out


def validation(target: str) -> dict[str, Any]:
    """A request with min_p=0.1 (and one with logit_bias) through vLLM's real SamplingParams
    validation, against a speculative config vLLM built."""
    from vllm import SamplingParams
    from vllm.config import ParallelConfig
    from vllm.engine.arg_utils import EngineArgs

    engine_args = EngineArgs(model=target, skip_tokenizer_init=True, speculative_config={
        "method": "ngram", "num_speculative_tokens": 3, "prompt_lookup_max": 3})
    model_config = engine_args.create_model_config()
    spec = engine_args.create_speculative_config(model_config, ParallelConfig())
    results = {}
    for name, kwargs in (("min_p", {"min_p": 0.1}), ("logit_bias", {"logit_bias": {5: 2.0}}),
                         ("plain", {})):
        params = SamplingParams(temperature=0.7, **kwargs)
        try:
            params.verify(model_config, spec, None, None)
            results[name] = None
        except Exception as exc:  # noqa: BLE001 - the refusal is the observation
            results[name] = f"{type(exc).__name__}: {exc}"[:300]
    return {"method": spec.method, "k": spec.num_speculative_tokens, "refusals": results}


def seams() -> dict[str, Any]:
    """What each seam holds now, and whether it is vLLM's original."""
    from vllm import SamplingParams
    from vllm.v1.sample import logits_processor as lp
    from vllm.v1.sample import rejection_sampler as rs
    from vllm.v1.worker import gpu_model_runner as gmr
    from vllm.v1.worker.gpu import model_runner as v2
    from vllm.v1.worker.gpu.spec_decode import rejection_sampler as rs2

    import specreg.adapters.substitution_runtime as runtime

    return {
        "active": list(runtime.active()),
        "sampler_original": gmr.RejectionSampler is rs.RejectionSampler,
        "sampler": gmr.RejectionSampler.__qualname__,
        "logitsprocs_original": gmr.build_logitsprocs is lp.build_logitsprocs,
        "validation_original": not hasattr(SamplingParams._validate_spec_decode,
                                           "__specreg_substitution__"),
        "v2_sampler_original": v2.RejectionSampler is rs2.RejectionSampler,
    }


def builders() -> dict[str, Any]:
    """vLLM's runner's build_logitsprocs with a speculative config, and what V2's sampler and an
    unsupported rejection method do with the substitution."""
    from types import SimpleNamespace

    from vllm.v1.worker import gpu_model_runner as gmr
    from vllm.v1.worker.gpu import model_runner as v2

    config = SimpleNamespace(speculative_config=object(),
                             scheduler_config=SimpleNamespace(max_num_seqs=8))
    procs = gmr.build_logitsprocs(config, torch.device("cpu"), False, False)
    out: dict[str, Any] = {"processors": sorted(type(p).__name__ for p in procs.all)}
    try:
        gmr.build_logitsprocs(config, torch.device("cpu"), False, False, ["x.Custom"])
        out["custom"] = None
    except Exception as exc:  # noqa: BLE001
        out["custom"] = f"{type(exc).__name__}: {exc}"[:300]
    for name, build in (
        ("v2", lambda: v2.RejectionSampler(None)),
        ("synthetic", lambda: gmr.RejectionSampler(
            None, SimpleNamespace(rejection_sample_method="synthetic",
                                  draft_sample_method="greedy", num_speculative_tokens=3))),
        ("probabilistic", lambda: gmr.RejectionSampler(
            None, SimpleNamespace(rejection_sample_method="standard",
                                  draft_sample_method="probabilistic", num_speculative_tokens=3))),
    ):
        try:
            build()
            out[name] = None
        except Exception as exc:  # noqa: BLE001
            out[name] = f"{type(exc).__name__}: {exc}"[:400]
    return out


def bad_input() -> dict[str, Any]:
    """A draft id outside the vocabulary reaches specreg's kernel checks (coded error)."""
    batch = {"logits": torch.randn(3, V), "drafts": [[V + 5, 1]],
             "requests": [{"temperature": 0.0}], "penalties": None, "bad_words": None}
    try:
        run("specreg", batch)
        return {"error": None}
    except Exception as exc:  # noqa: BLE001
        return {"error": f"{type(exc).__name__}: {exc}"[:400]}


def platform_overrides() -> dict[str, Any]:
    """init_worker's order: plugins (the substitution, already installed), then the platform's
    kernel overrides. Register the CPU platform's C++ fallbacks over vLLM's rejection kernels
    (as it does without Triton-CPU), then run both samplers: specreg's never launches them."""
    import vllm.triton_utils as tu
    from vllm.platforms.cpu import CpuPlatform
    from vllm.v1.sample import rejection_sampler as rs

    tu.HAS_TRITON = False
    CpuPlatform.register_triton_kernel_overrides()
    overridden = type(rs.rejection_greedy_sample_kernel).__name__
    batch = {"logits": torch.randn(6, V), "drafts": [[1, 2], [3]],
             "requests": [{"temperature": 0.0}, {"temperature": 0.9}], "penalties": None,
             "bad_words": None}
    out: dict[str, Any] = {"kernel_after_overrides": overridden}
    for kind in ("specreg", "vllm"):
        try:
            out[kind] = run(kind, batch).tolist()
        except Exception as exc:  # noqa: BLE001 - the platform's fallback needs vllm._C here
            out[kind] = f"{type(exc).__name__}: {exc}"[:200]
    return out


def run_mode(args: dict[str, Any]) -> dict[str, Any]:
    logging.disable(logging.CRITICAL)
    from vllm.plugins import load_general_plugins

    load_general_plugins()
    from vllm.v1.sample.ops import topk_topp_sampler

    topk_topp_sampler.HAS_TRITON = False  # the random path's torch branch on CPU
    import vllm.v1.sample.rejection_sampler  # noqa: F401 - loads the modules patched below
    import vllm.v1.worker.gpu_model_runner  # noqa: F401

    for module in list(sys.modules.values()):  # no pinned memory without an accelerator
        if getattr(module, "PIN_MEMORY", None) is True:
            module.PIN_MEMORY = False
    out: dict[str, Any] = {"seams": seams(), "validation": validation(args["target"])}
    if args["mode"] == "on":
        seconds = out["seconds"] = {}
        for name, check in (
            ("builders", builders), ("bad_input", bad_input),
            ("greedy", lambda: greedy_parity(args["greedy_batches"], seed=1)),
            ("logit_bias", lambda: logit_bias_greedy(args["bias_batches"], seed=2)),
            ("same_uniforms", lambda: same_uniforms(args["sampled_batches"], seed=3)),
            ("lossless", lambda: lossless(args["samples"], seed=4)),
            ("platform", platform_overrides),  # last: it rebinds vLLM's kernels
        ):
            started = time.perf_counter()
            out[name] = check()
            seconds[name] = round(time.perf_counter() - started, 2)
    return out


def preload() -> None:
    """What both runs import before loading the plugins (one_import.py): torch and vLLM's
    plugin loader."""
    import torch  # noqa: F401
    import vllm.plugins  # noqa: F401


def main() -> None:
    if "--runs" in sys.argv:  # both modes in one process (one_import.py)
        import one_import

        one_import.main(preload, run_mode)
        return
    out = run_mode(json.load(sys.stdin))
    sys.stdout.write("\n" + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
