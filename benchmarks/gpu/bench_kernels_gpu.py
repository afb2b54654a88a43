"""Every Triton kernel of specreg and its plugins, one entry per kernel family, against its torch
path and, for the memory-bound ones, as a share of the HBM bandwidth.

    python benchmarks/gpu/bench_kernels_gpu.py [--peak-gbs 4800] [--reps 20] [--only chain]
    python benchmarks/gpu/bench_kernels_gpu.py --dry-run     # no GPU: interpreter, tiny sizes

Each entry builds its inputs at the target sizes (b 64, n 8, V 128k; EAGLE N 16; DSpark rank
256; HiSparse bs 16, top_k 2048), runs the family's public wrapper with `backend="triton"` and
with `backend="torch"`, checks that they agree, and records which Triton kernels the call
launched: the run fails when an entry launches other kernels than `ENTRIES` says it covers, so
the list cannot drift from what runs (`tests/kernels/test_gpu_coverage.py` checks that the
list names every Triton kernel of the repository). On a GPU it then times both paths (CUDA
events, median) and, for a memory-bound family, prints the FLOOR line of `gpu_timing.
floor_at_peak`: the bytes the family's rule must read and write (computed from the inputs and
the result, as `benchmarks/bench_traffic.py` counts them), moved at `--peak-gbs` (H200 HBM3e:
about 4800 GB/s), against the kernel's time; "x% of it" is the share of the peak reached. The
latency-bound families (a few KiB of work: tree building, the draft block, the penalties'
entries, the HiSparse decisions) print their time only; the HiSparse copy's bound is the host
link, measured against the pinned-copy peak by bench_hisparse_gpu.py.

`--dry-run` sets TRITON_INTERPRET=1 before triton is imported and runs every entry once on the
CPU at tiny sizes (the interpreter for the Triton path): what it proves is that every entry runs
and agrees with torch, and which kernels each launches; it times nothing.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import sys
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

DRY_RUN = "--dry-run" in sys.argv
if DRY_RUN:
    os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import torch  # noqa: E402

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent))  # benchmarks/: bench_hisparse's workload
from gpu_timing import cuda_time_ms, floor_at_peak  # noqa: E402

HBM = "hbm"  # memory-bound: its rule's bytes at the HBM peak
LATENCY = "latency"  # a few KiB of work: time only
HOST_LINK = "host link"  # bound by the pinned-host copy (bench_hisparse_gpu.py)


@dataclass
class Sizes:
    b: int
    n: int
    vocab: int
    tree_b: int
    tree_n: int
    tree_vocab: int
    rank: int
    hisparse_bs: int
    top_k: int
    hot: int


FULL = Sizes(b=64, n=8, vocab=131072, tree_b=64, tree_n=16, tree_vocab=128256, rank=256,
             hisparse_bs=16, top_k=2048, hot=4096)
TINY = Sizes(b=3, n=4, vocab=96, tree_b=2, tree_n=6, tree_vocab=64, rank=16, hisparse_bs=2,
             top_k=8, hot=16)


@dataclass
class Case:
    """One measured call: the Triton and torch calls, their agreement, the rule's bytes."""

    name: str
    triton: Callable[[], object]
    torch: Callable[[], object]
    same: Callable[[object, object], bool]
    rule_bytes: Callable[[object], int] | None = None  # from the Triton call's result
    what: str = ""
    #: What to time when it is not the checked call itself (a stateful call: one more step)
    time_triton: Callable[[], object] | None = None
    time_torch: Callable[[], object] | None = None


@dataclass
class Ctx:
    device: torch.device
    sizes: Sizes
    gen: torch.Generator
    weights_dtype: torch.dtype
    reps: int = 20

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, device=self.device, generator=self.gen)

    def rand(self, *shape: int) -> torch.Tensor:
        return torch.rand(*shape, device=self.device, generator=self.gen)

    def randint(self, high: int, shape: tuple[int, ...]) -> torch.Tensor:
        return torch.randint(0, high, shape, device=self.device, generator=self.gen)


def _eq(*fields: str) -> Callable[[object, object], bool]:
    return lambda a, b: all(torch.equal(getattr(a, f), getattr(b, f)) for f in fields)


def _chain_inputs(ctx: Ctx):
    """Partly accepted chains (bench_traffic's shape): 70 % of drafts are the target's argmax."""
    s = ctx.sizes
    p = torch.softmax(3 * ctx.randn(s.b, s.n, s.vocab), -1)
    q = torch.softmax(3 * ctx.randn(s.b, s.n - 1, s.vocab), -1)
    candidates = ctx.randint(s.vocab, (s.b, s.n))
    agree = ctx.rand(s.b, s.n - 1) < 0.7
    candidates[:, 1:] = torch.where(agree, p[:, :-1].argmax(-1), candidates[:, 1:])
    coins = ctx.rand(s.b, s.n - 1)
    stream = {"keys": ctx.randint(2**62, (s.b,)), "positions": ctx.randint(4096, (s.b,))}
    return candidates, p, q, coins, stream


def chain_sampling_rule(accept: torch.Tensor, n: int, vocab: int, has_q: bool) -> int:
    """Bytes of p and q the chain rule reads (float32), plus candidates, coins, the request's
    key and position (int64, f32, int64); the same count as benchmarks/bench_traffic.py."""
    total = 0
    for a in accept.tolist():
        tested = min(a + 1, n - 1)
        total += tested * 4 * (2 if has_q else 1)
        rows = (2 if has_q else 1) if a < n - 1 else 1  # residual rows, or the bonus row
        total += rows * vocab * 4 + n * 8 + (n - 1) * 4 + 2 * 8
    return total


def _result_bytes(b: int, n: int) -> int:
    return b * n * 8 + b * 4  # output tokens int64, accept lengths int32


# ------------------------------------------------------------------------------ the entries
def chain(ctx: Ctx) -> list[Case]:
    from specreg.kernels.chain import verify_chain_greedy, verify_chain_sampling

    s = ctx.sizes
    candidates, p, q, coins, stream = _chain_inputs(ctx)
    logits = torch.log(p)

    def greedy_rule(result) -> int:
        rows = sum(min(a + 1, s.n) for a in result.accept_len.tolist())
        return rows * s.vocab * 4 + s.b * s.n * 8 + _result_bytes(s.b, s.n)

    cases = [Case("chain greedy verify",
                  lambda: verify_chain_greedy(candidates, logits, backend="triton"),
                  lambda: verify_chain_greedy(candidates, logits, backend="torch"),
                  _eq("output_tokens", "accept_len"), greedy_rule,
                  "logits rows up to the first mismatch, candidates, result")]
    for label, draft in (("with q", q), ("target-only", None)):
        def run(backend, draft=draft):
            return verify_chain_sampling(candidates, p, draft, coins=coins, **stream,
                                         backend=backend)

        def rule(result, draft=draft) -> int:
            return (chain_sampling_rule(result.accept_len, s.n, s.vocab, draft is not None)
                    + _result_bytes(s.b, s.n))

        cases.append(Case(f"chain sampling verify {label}", lambda run=run: run("triton"),
                          lambda run=run: run("torch"), _eq("output_tokens", "accept_len"), rule,
                          "p(x), q(x) of tested drafts, the stop position's rows, result"))

    def invariant(backend):
        from specreg.kernels.chain import verify_chain_invariant

        return verify_chain_invariant(candidates, p, **stream, backend=backend)

    def invariant_rule(result) -> int:
        rows = sum(min(a + 1, s.n) for a in result.accept_len.tolist())
        return rows * s.vocab * 4 + s.b * s.n * 8 + s.b * 16 + _result_bytes(s.b, s.n)

    cases.append(Case("chain invariant verify", lambda: invariant("triton"),
                      lambda: invariant("torch"), _eq("output_tokens", "accept_len"),
                      invariant_rule, "p rows up to the first mismatch (each raced), result"))
    return cases


def filtering(ctx: Ctx) -> list[Case]:
    """The filtered rows the drafters sample from (`specreg.step.draft_sampling.filtered_q`)."""
    from specreg.testing.demo_params import mixed_demo_params
    from specreg.step.draft_sampling import filtered_q

    s = ctx.sizes
    logits = 3 * ctx.randn(s.b, s.vocab)
    params = mixed_demo_params(s.b, device=ctx.device)
    rows = (~params.greedy).nonzero().flatten()

    def run(backend):
        return filtered_q(logits, params, rows, backend=backend)

    return [Case("filtered draft rows (mixed parameters)", lambda: run("triton"),
                 lambda: run("torch"), lambda a, b: torch.allclose(a, b, atol=1e-6),
                 lambda _: 2 * rows.numel() * s.vocab * 4, "the rows read, the rows written")]


def relaxed(ctx: Ctx) -> list[Case]:
    """The lossy acceptance rules (specreg.kernels.relaxed) on the chain inputs."""
    from specreg.kernels.relaxed import RuleParams, verify_chain_relaxed
    from specreg.kernels.relaxed.types import SYNTHETIC, THRESHOLDS

    s = ctx.sizes
    candidates, p, q, coins, stream = _chain_inputs(ctx)
    rules = (
        ("thresholds", RuleParams(mode=THRESHOLDS, threshold_single=0.5, threshold_acc=0.5), q),
        ("typical", RuleParams(mode=1), None),
        ("synthetic", RuleParams(mode=SYNTHETIC, rates=(0.9,) * (s.n - 1)), None),
    )
    cases = []
    for label, params, draft in rules:
        def run(backend, params=params, draft=draft):
            return verify_chain_relaxed(candidates, p, draft, rule=params, coins=coins,
                                        **stream, backend=backend)

        def rule(result, params=params, draft=draft) -> int:
            if params.mode == THRESHOLDS:
                return (chain_sampling_rule(result.accept_len, s.n, s.vocab, True)
                        + _result_bytes(s.b, s.n))
            tested = 0 if params.mode == SYNTHETIC else sum(
                min(a + 1, s.n - 1) for a in result.accept_len.tolist())
            return (tested + s.b) * s.vocab * 4 + s.b * s.n * 12 + _result_bytes(s.b, s.n)

        cases.append(Case(f"relaxed verify {label}", lambda run=run: run("triton"),
                          lambda run=run: run("torch"), _eq("output_tokens", "accept_len"), rule,
                          "tested drafts (typical: their whole rows), the emitted row, result"))
    return cases


def chain_params(ctx: Ctx) -> list[Case]:
    from specreg.testing.demo_params import mixed_demo_params
    from specreg.kernels.chain_params import verify_chain_with_params

    s = ctx.sizes
    candidates, p, q, coins, stream = _chain_inputs(ctx)
    target, draft = torch.log(p), torch.log(q)
    params = mixed_demo_params(s.b, device=ctx.device)

    def run(backend):
        return verify_chain_with_params(candidates, target, draft, params=params, coins=coins,
                                        **stream, backend=backend)

    def rule(result) -> int:
        # the filters need every row the chain may reach once (row statistics), then the
        # chain's own reads of those rows: target rows up to the stop, draft rows before it
        rows = sum(min(a + 1, s.n) for a in result.accept_len.tolist())
        drafts = sum(min(a + 1, s.n - 1) for a in result.accept_len.tolist())
        return (rows + drafts) * s.vocab * 4 + s.b * s.n * 12 + _result_bytes(s.b, s.n)

    return [Case("chain verify with sampling parameters (mixed)", lambda: run("triton"),
                 lambda: run("torch"), _eq("output_tokens", "accept_len"), rule,
                 "target and draft logits rows the chain reaches, candidates, coins, result")]


def random_stream(ctx: Ctx) -> list[Case]:
    from specreg.kernels.random_stream import stream_uniforms

    s = ctx.sizes
    rows = torch.arange(s.b * s.n, dtype=torch.int64, device=ctx.device)

    def run(backend):
        return stream_uniforms(7, rows // s.n, rows % s.n, s.vocab, backend=backend)

    return [Case("random stream uniforms", lambda: run("triton"), lambda: run("torch"),
                 torch.equal, lambda _: rows.numel() * (s.vocab * 4 + 24),
                 "the keys, one float32 per (row, token) written")]


def argmax(ctx: Ctx) -> list[Case]:
    from specreg.kernels.argmax import row_argmax_triton

    s = ctx.sizes
    rows = ctx.randn(s.b * s.n, s.vocab)
    return [Case("row argmax", lambda: row_argmax_triton(rows), lambda: rows.argmax(-1),
                 torch.equal, lambda _: rows.numel() * 4 + rows.shape[0] * 8,
                 "every row, the argmax")]


def logprobs(ctx: Ctx) -> list[Case]:
    from specreg.testing.demo_params import mixed_demo_params
    from specreg.kernels.chain_params import verify_chain_with_params
    from specreg.kernels.logprobs import emitted_logprobs

    s = ctx.sizes
    candidates, p, _, coins, stream = _chain_inputs(ctx)
    target = torch.log(p)
    params = mixed_demo_params(s.b, device=ctx.device)
    result = verify_chain_with_params(candidates, target, None, params=params, coins=coins,
                                      **stream, backend="torch")
    emitted = int((result.accept_len + 1).sum())

    def run(backend):
        return emitted_logprobs(result, target, params=params, top_n=4, backend=backend)

    def same(a, b) -> bool:
        finite = torch.isfinite(b.token)
        return (torch.equal(finite, torch.isfinite(a.token))
                and torch.allclose(a.token[finite], b.token[finite], atol=1e-4)
                and torch.equal(a.top_tokens, b.top_tokens))

    return [Case("emitted logprobs, top 4 (mixed parameters)", lambda: run("triton"),
                 lambda: run("torch"), same,
                 lambda _: emitted * s.vocab * 4 + s.b * s.n * (4 + 4 * 12),
                 "the emitted tokens' rows, the logprobs and top-4 written")]


def token_mask(ctx: Ctx) -> list[Case]:
    from specreg.kernels.token_mask import apply_token_bitmask_, bitmask_words

    s = ctx.sizes
    scores = ctx.randn(s.b, s.n, s.vocab)
    words = torch.randint(-2**31, 2**31 - 1, (s.b, s.n, bitmask_words(s.vocab)),
                          device=ctx.device, generator=ctx.gen, dtype=torch.int64).to(torch.int32)
    work = scores.clone()

    def run(backend):
        work.copy_(scores)  # the kernel masks in place
        return apply_token_bitmask_(work, words, backend=backend).clone()

    def rule(out) -> int:
        return words.numel() * 4 + int(torch.isneginf(out).sum()) * 4

    return [Case("grammar bitmask", lambda: run("triton"), lambda: run("torch"), torch.equal,
                 rule, "the bitmask read, -inf written on the disallowed entries")]


def penalties(ctx: Ctx) -> list[Case]:
    from specreg.kernels.penalties import Penalties, apply_penalties_, chain_context

    s = ctx.sizes
    logits = 3 * ctx.randn(s.b, s.n, s.vocab)
    candidates = ctx.randint(64, (s.b, s.n))
    prompt = ctx.randint(s.vocab, (s.b, 32)).tolist()
    output = ctx.randint(64, (s.b, 16)).tolist()
    pen = Penalties.of(s.b, repetition=1.2, frequency=0.3, presence=0.2, prompt=prompt,
                       output=output, logit_bias=[{1: 2.0, 5: -1.0}] * s.b, device=ctx.device)
    context = chain_context(candidates)
    work = logits.clone()

    def run(backend):
        work.copy_(logits)
        return apply_penalties_(work, pen, context, backend=backend).clone()

    return [Case("penalties (repetition, frequency, presence, bias)", lambda: run("triton"),
                 lambda: run("torch"), lambda a, b: torch.allclose(a, b, rtol=1e-6, atol=1e-5))]


def eagle_tree(ctx: Ctx) -> list[Case]:
    from bench_eagle_gpu import make
    from specreg.kernels.tree_build import build_tree
    from specreg.kernels.tree_verify_greedy import verify_tree_greedy
    from specreg.kernels.tree_verify_params import verify_tree_with_params
    from specreg.kernels.tree_verify_sampling import verify_tree_sampling

    from specreg.testing.demo_params import mixed_demo_params

    s = ctx.sizes
    b, n, v, topk, steps = s.tree_b, s.tree_n, s.tree_vocab, 4, 4
    if s is TINY:
        topk, steps = 2, 3
    parent_list, sel, drafts = make(b, topk, steps, n, v, ctx.device)
    bonus = ctx.randint(v, (b,))
    seq = 100 + ctx.randint(1900, (b,))
    kw = dict(topk=topk, depth=steps, num_verify_tokens=n, mask_mode="full",
              seq_lens_sum=int(seq.sum()))

    def build(backend):
        return build_tree(bonus, parent_list, sel, drafts, seq, backend=backend, **kw)

    tree = build("torch")
    cand = tree.draft_tokens.view(b, n)
    links = (cand, tree.retrieve_index, tree.retrieve_next_token, tree.retrieve_next_sibling)
    logits = ctx.randn(b, n, v)
    p = torch.softmax(logits, -1)
    q = torch.softmax(ctx.randn(b, n, v), -1)
    coins = ctx.rand(b, n)
    stream = {"keys": ctx.randint(2**62, (b,)), "positions": ctx.randint(4096, (b,))}
    cases = [
        Case("EAGLE build_tree", lambda: build("triton"), lambda: build("torch"),
             _eq("tree_mask", "positions", "retrieve_index", "retrieve_next_token",
                 "retrieve_next_sibling", "draft_tokens")),
        Case("EAGLE tree greedy verify (from logits)",
             lambda: verify_tree_greedy(*links, depth=steps, target_logits=logits,
                                        backend="triton"),
             lambda: verify_tree_greedy(*links, depth=steps, target_logits=logits,
                                        backend="torch"),
             _eq("predicts", "accept_index", "accept_token_num"),
             # the rule needs every node's argmax (a node's children are known only once it
             # is checked): the whole logits
             lambda _: logits.numel() * 4 + cand.numel() * 8 * 4, "all logits, the tree links"),
    ]
    for label, draft in (("with q", q), ("target-only", None)):
        def run(backend, draft=draft):
            return verify_tree_sampling(*links, p, depth=steps, draft_probs=draft, coins=coins,
                                        **stream, backend=backend)

        def rule(result, draft=draft) -> int:
            # the accepted path's p(x) (and q(x)), the rows where it stops (twice with q)
            path = int((result.accept_index >= 0).sum())
            per_row = (2 if draft is not None else 1) * v * 4
            return path * 8 + b * per_row + cand.numel() * 8 * 4

        cases.append(Case(f"EAGLE tree sampling verify {label}", lambda run=run: run("triton"),
                          lambda run=run: run("torch"), _eq("predicts", "accept_index",
                                                              "accept_token_num"), rule,
                          "the path's p(x), q(x), the stop node's rows, the tree links"))
    params = mixed_demo_params(b, device=ctx.device)  # greedy rows, and every filter

    log_p, log_q = torch.log(p), torch.log(q)

    def with_params(backend):
        return verify_tree_with_params(*links, log_p, depth=steps, params=params, draft=log_q,
                                       backend=backend)

    def params_rule(result) -> int:
        # the row statistics read each node's target and draft rows once; then as above
        path = int((result.accept_index >= 0).sum())
        return 2 * logits.numel() * 4 + path * 8 + b * 2 * v * 4 + cand.numel() * 8 * 4

    cases.append(Case("EAGLE tree verify with sampling parameters (mixed)",
                      lambda: with_params("triton"), lambda: with_params("torch"),
                      _eq("predicts", "accept_index", "accept_token_num"), params_rule,
                      "every node's target and draft rows (filters), the path, the links"))
    return cases


def dspark(ctx: Ctx) -> list[Case]:
    from specreg_dspark.kernels.draft_block import build_draft_block
    from specreg_dspark.kernels.markov_greedy import markov_greedy_step

    s = ctx.sizes
    w1 = (ctx.randn(s.vocab, s.rank) * 0.05).to(ctx.weights_dtype)
    w2 = (ctx.randn(s.vocab, s.rank) * 0.05).to(ctx.weights_dtype)
    base = ctx.randn(s.b, s.vocab).to(ctx.weights_dtype)
    prev = ctx.randint(s.vocab, (s.b,))
    scores = base.float() + w1[prev].float() @ w2.float().T

    def same_pick(a, b) -> bool:  # equal, or a near-tie under float32 accumulation order
        picked, best = scores.gather(1, a[:, None])[:, 0], scores.max(1).values
        return torch.equal(a, b) or bool(torch.allclose(picked, best, rtol=0, atol=1e-3))

    anchor, positions = ctx.randint(s.vocab, (s.b,)), ctx.randint(4096, (s.b,))
    width = 8

    def block(backend):
        return build_draft_block(anchor, positions, width=width, mask_token_id=s.vocab - 1,
                                 vocab_size=s.vocab, backend=backend)

    elem = w2.element_size()
    return [
        Case("DSpark fused greedy Markov step",
             lambda: markov_greedy_step(base, prev, w1, w2, backend="triton"),
             lambda: markov_greedy_step(base, prev, w1, w2, backend="torch"), same_pick,
             lambda _: (w2.numel() + base.numel()) * elem + s.b * (s.rank * elem + 16),
             "W2, the base logits, W1[prev], the tokens"),
        Case("DSpark draft block", lambda: block("triton"), lambda: block("torch"),
             lambda a, b: all(torch.equal(x, y) for x, y in zip(a, b, strict=True))),
    ]


def hisparse(ctx: Ctx) -> list[Case]:
    from bench_hisparse import Workload
    from specreg_hisparse.kernels.planned_copy.torch_impl import copy_planned_torch
    from specreg_hisparse.kernels.planned_copy.triton_impl import copy_planned_triton
    from specreg_hisparse.kernels.planned_copy.types import PlannedCopy
    from specreg_hisparse.sizes import compute_layout
    from specreg_hisparse.swapper import HiSparseSwapper

    s = ctx.sizes
    bs, steps, row_bytes, calls = s.hisparse_bs, 4, 656, 4
    work = Workload(bs, s.top_k, 0.05)
    n_new = max(1, round(0.05 * s.top_k))
    max_seq = s.top_k + n_new * steps * (calls + 2 * (ctx.reps + WARMUP) + 16) + 1
    layout, problems = compute_layout(s.top_k, s.hot, None, bs, steps, row_bytes=row_bytes,
                                      max_seq_len=max_seq, device=ctx.device.type)
    assert layout is not None, problems
    req, seq = torch.arange(bs, device=ctx.device), torch.full((bs, steps), max_seq,
                                                                device=ctx.device)
    num_real = torch.tensor([bs], dtype=torch.int32, device=ctx.device)
    sequence = [work.call(steps).to(ctx.device) for _ in range(calls)]
    host_words = torch.randint(0, 255, (layout.req_slots * max_seq, row_bytes),
                               dtype=torch.uint8, generator=torch.Generator().manual_seed(0))

    def fresh(backend):
        with kernel_backend(backend):
            swapper = HiSparseSwapper(layout, device=ctx.device)
            host = swapper.new_host_cache(row_bytes)  # pinned when the swapper is on CUDA
            host.copy_(host_words[: host.shape[0]].view(host.shape))
            dev = swapper.new_device_buffer(row_bytes)
            pos = torch.arange(layout.max_seq_len, device=ctx.device)
            for slot in range(layout.req_slots):
                r = torch.full_like(pos, slot)
                swapper.set_host_locs(r, pos, swapper.default_host_rows(r, pos))
        return swapper, host, dev

    def swaps(backend):
        """A fresh swapper over the same call sequence: the last call's locations, device
        rows and plan (the swap's decisions and the planned copy it launches)."""
        swapper, host, dev = fresh(backend)
        with kernel_backend(backend):
            for tokens in sequence:
                locs = swapper.swap(tokens, req, seq, num_real, host_cache=host,
                                    device_buffer=dev)
        assert int(swapper.error_count) == 0
        return locs, dev, swapper.last_plan, host

    def one_more_call(backend):
        """One swap call per timed call, on a swapper that keeps going (the timed sequence
        brings fresh tokens each call, as a server's steps do)."""
        swapper, host, dev = fresh(backend)
        timed = iter([work.call(steps).to(ctx.device) for _ in range(ctx.reps + WARMUP)])

        def call():
            with kernel_backend(backend):
                return swapper.swap(next(timed), req, seq, num_real, host_cache=host,
                                    device_buffer=dev)
        return call

    def same_swap(a, b) -> bool:
        return torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])

    _, _, plan, host = swaps("torch")

    def copy(kernel, dev):  # the same rows each call: timing repeats an idempotent copy
        kernel(PlannedCopy(miss_src=plan.miss_src, miss_dst=plan.miss_dst,
                           miss_count=plan.miss_count, num_real=num_real, host_cache=host,
                           device_buffer=dev))
        return dev

    dev_triton, dev_torch = (torch.zeros(layout.device_rows, row_bytes, dtype=torch.uint8,
                                         device=ctx.device) for _ in range(2))
    return [
        Case("HiSparse swap (decisions, commit, copy)", lambda: swaps("triton"),
             lambda: swaps("torch"), same_swap,
             time_triton=None if DRY_RUN else one_more_call("triton"),
             time_torch=None if DRY_RUN else one_more_call("torch")),
        Case("HiSparse planned copy", lambda: copy(copy_planned_triton, dev_triton),
             lambda: copy(copy_planned_torch, dev_torch), torch.equal),
    ]


#: cuda_time_ms's warm-up calls (a timed HiSparse swap makes warm-up + repetitions calls).
WARMUP = 3


@contextlib.contextmanager
def kernel_backend(name: str):
    """SPECREG_KERNEL_BACKEND set to `name` inside (the swapper reads it per call)."""
    previous = os.environ.get("SPECREG_KERNEL_BACKEND")
    os.environ["SPECREG_KERNEL_BACKEND"] = name
    try:
        yield
    finally:
        if previous is None:
            os.environ.pop("SPECREG_KERNEL_BACKEND", None)
        else:
            os.environ["SPECREG_KERNEL_BACKEND"] = previous


@dataclass(frozen=True)
class Entry:
    family: str
    kernels: tuple[str, ...]  # the `*_kernel` functions its cases launch
    bound: str
    cases: Callable[[Ctx], list[Case]]


#: Every Triton kernel family: the kernels each launches, and what bounds it on a GPU.
ENTRIES: tuple[Entry, ...] = (
    Entry("chain", ("_chain_greedy_kernel", "_chain_sampling_kernel", "_chain_invariant_kernel"),
          HBM, chain),
    Entry("filtering", ("_row_stats_kernel", "_filtered_rows_kernel"), HBM, filtering),
    Entry("chain_params", ("_chain_params_kernel",), HBM, chain_params),
    Entry("relaxed", ("_relaxed_kernel",), HBM, relaxed),
    Entry("random_stream", ("_random_stream_kernel",), HBM, random_stream),
    Entry("argmax", ("_row_argmax_kernel",), HBM, argmax),
    Entry("logprobs", ("_row_stats_kernel", "_log_probs_at_kernel"), HBM, logprobs),
    Entry("token_mask", ("_apply_bitmask_kernel",), HBM, token_mask),
    Entry("penalties", ("_penalise_entries_kernel",), LATENCY, penalties),
    Entry("eagle", ("_build_tree_kernel", "_row_argmax_kernel", "_tree_greedy_kernel",
                    "_tree_sampling_kernel", "_row_stats_kernel", "_filtered_rows_kernel"), HBM,
          eagle_tree),
    Entry("dspark", ("_markov_greedy_tiles_kernel", "_markov_greedy_combine_kernel",
                     "_draft_block_kernel"), HBM, dspark),
    Entry("hisparse", ("_swap_plan_commit_kernel", "_planned_copy_kernel"), HOST_LINK, hisparse),
)


def covered_kernels() -> set[str]:
    return {k for entry in ENTRIES for k in entry.kernels}


# ------------------------------------------------------------------------------ launches seen
class Launches:
    """The names of the Triton kernels launched since the last `take()`."""

    def __init__(self) -> None:
        self.seen: set[str] = set()
        if DRY_RUN:
            from triton.runtime import interpreter

            call = interpreter.GridExecutor.__call__

            def grid_call(executor, *args, **kwargs):
                self.seen.add(executor.fn.__name__)
                return call(executor, *args, **kwargs)

            interpreter.GridExecutor.__call__ = grid_call
        else:
            from triton.runtime.jit import JITFunction

            run = JITFunction.run

            def jit_run(kernel, *args, **kwargs):
                self.seen.add(kernel.fn.__name__)
                return run(kernel, *args, **kwargs)

            JITFunction.run = jit_run

    def take(self) -> set[str]:
        seen, self.seen = self.seen, set()
        return seen


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--dry-run", action="store_true",
                        help="CPU, Triton interpreter, tiny sizes: every entry runs once")
    parser.add_argument("--peak-gbs", type=float, default=4800.0,
                        help="HBM peak in GB/s (H200 HBM3e: about 4800)")
    parser.add_argument("--reps", type=int, default=20)
    parser.add_argument("--only", default="", help="comma-separated families to run")
    args = parser.parse_args(argv)
    if not args.dry_run and not torch.cuda.is_available():
        print("no CUDA device: run with --dry-run for the CPU check", file=sys.stderr)
        return 2
    device = torch.device("cpu" if args.dry_run else "cuda")
    sizes = TINY if args.dry_run else FULL
    wanted = {w for w in args.only.split(",") if w}
    launches = Launches()
    ctx = Ctx(device, sizes, torch.Generator(device=device).manual_seed(0),
              torch.float32 if args.dry_run else torch.bfloat16, args.reps)
    mode = "dry run (interpreter, tiny sizes, no timing)" if args.dry_run else (
        f"{torch.cuda.get_device_name()}, HBM peak {args.peak_gbs:.0f} GB/s")
    print(f"# {mode}; {sizes}")
    failures: list[str] = []
    disagree: list[str] = []
    for entry in ENTRIES:
        if wanted and entry.family not in wanted:
            continue
        launched: set[str] = set()
        try:
            cases = entry.cases(ctx)
            launches.take()  # the setup's own launches (none expected) are not the entry's
            for case in cases:
                got = case.triton()
                launched |= launches.take()
                want = case.torch()
                if launches.take():
                    raise AssertionError(f"{case.name}: the torch path launched Triton kernels")
                if not case.same(got, want):
                    if args.dry_run:
                        raise AssertionError(f"{case.name}: Triton and torch disagree")
                    disagree.append(f"{entry.family}: {case.name}")  # timed all the same
                    print(f"DISAGREE {entry.family}: {case.name}: Triton and torch differ")
                if args.dry_run:
                    print(f"DRY {entry.family}: {case.name}: Triton == torch")
                    continue
                t_triton = cuda_time_ms(case.time_triton or case.triton, args.reps, WARMUP) / 1e3
                launches.take()
                t_torch = cuda_time_ms(case.time_torch or case.torch, args.reps, WARMUP) / 1e3
                print(f"{entry.family:<13} {case.name:<52} triton {t_triton * 1e6:9.1f} us  "
                      f"torch {t_torch * 1e6:9.1f} us  x{t_torch / t_triton:6.2f}  ({entry.bound})")
                if entry.bound == HBM and case.rule_bytes is not None:
                    print(floor_at_peak(f"{case.name} (Triton) b={sizes.b}", t_triton,
                                        case.rule_bytes(got), args.peak_gbs,
                                        f"the rule reads and writes ({case.what})"))
        except Exception as exc:  # keep going: one broken family must not hide the others
            failures.append(entry.family)
            print(f"FAIL {entry.family}: {type(exc).__name__}: {exc}")
            continue
        if launched != set(entry.kernels):
            failures.append(entry.family)
            print(f"FAIL {entry.family}: launched {sorted(launched)}, ENTRIES says "
                  f"{sorted(entry.kernels)}")
        else:
            print(f"KERNELS {entry.family}: {', '.join(sorted(launched))}")
    ran = [e for e in ENTRIES if not wanted or e.family in wanted]
    print(f"\n{len(ran) - len(failures)}/{len(ran)} kernel families ran"
          + (f"; failed: {', '.join(failures)}" if failures else "")
          + (f"; Triton and torch differ on: {'; '.join(disagree)}" if disagree else ""))
    return 1 if failures or disagree else 0


if __name__ == "__main__":
    raise SystemExit(main())
