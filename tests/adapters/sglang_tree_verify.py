"""Drives SGLang's own eagle_sample and its Triton kernels on CPU, with or without `tree_verify`.

Runs inside the pinned framework environment with TRITON_INTERPRET=1 (SGLang's Triton kernels
are the oracles). SGLang's plugin loader installs the substitution when the test sets
SPECREG_SGLANG=enforce and SPECREG_SGLANG_SUBSTITUTE=tree_verify. Only what needs a GPU or a
launched server is stood in for: the published server arguments (a tiny Llama folder), a
tensor-parallel group of one, and the CUDA-only guard of SGLang's Triton renorm fallback.

Payload {"mode": "on" | "off", "model_path": ..., "sizes": {...}}; prints one JSON line:
- off: what SGLang's names hold (identity with SGLang's own objects), what eagle_sample does
  on CPU, then the SR182 faults (a missing seam; a hook the registry did not apply).
- on: the same identities (now specreg's), the oracle comparisons case by case, the
  chi-square counts, the seed checks and the bad-input codes.

Sampling oracles compare acceptance decisions (the accepted path, its count and the accepted
drafts) on the same uniforms: specreg draws the final token (correction or bonus) by an exact
race on its own random stream, keyed by the request's seed and sequence length (or a fresh key),
not by SGLang's one final coin, so SGLang's final token is no oracle for it; the chi-square
counts check that the emitted tokens follow the target.
"""

from __future__ import annotations

import json
import logging
import sys
import time
from types import SimpleNamespace

SCENARIO_LOGITS = [3.0, 2.6, 2.2, 1.5, 1.0, 0.5, 0.0, -0.5, -1.0, -2.0, -3.0, -4.0]
#: (temperature, top_k, top_p, min_p) of the chi-square requests: every filter cuts.
SCENARIO_PARAMS = (0.8, 8, 0.97, 0.08)
# The chi-square tree (N = 6): root -> 1 (token 0), 2 (token 6), 3 (token 0 again), 5 (token
# 10, outside top-k); node 1 -> 4. Tokens 6 and 10 have no mass after the filters.
SCENARIO_TOKENS = [0, 0, 6, 0, 1, 10]
SCENARIO_NEXT = [1, 4, -1, -1, -1, -1]
SCENARIO_SIBLING = [-1, 2, 3, 5, -1, -1]


def publish_server_args(model_path: str) -> None:
    """What a scheduler process has before verifying: resolved arguments, a TP group of one."""
    from sglang.srt.runtime_context import get_context, get_parallel
    from sglang.srt.server_args import ServerArgs

    server_args = ServerArgs(model_path=model_path, device="cuda", speculative_algorithm="EAGLE",
                             speculative_num_steps=3, speculative_eagle_topk=2,
                             speculative_num_draft_tokens=4)
    server_args.resolve_once()
    get_context().set_server_args(server_args)
    group = SimpleNamespace(world_size=1)
    get_parallel().override_permanently(tp_group=group, attn_tp_group=group)


def names_now() -> dict:
    """Per seam: whether the name holds SGLang's own object (defining module and call site)."""
    import sglang.kernels.ops.sampling.renorm as renorm
    import sglang.kernels.ops.speculative.spec_tree as spec_tree
    import sglang.kernels.ops.speculative.verify_sampling as verify_sampling
    import sglang.srt.speculative.eagle_utils as eu

    def own(fn, module) -> bool:
        return getattr(fn, "__module__", None) == module and not hasattr(fn, "__wrapped__")

    return {
        "greedy_is_sglangs": own(spec_tree.verify_tree_greedy_func, spec_tree.__name__),
        "greedy_call_site_same": eu.verify_tree_greedy_func is spec_tree.verify_tree_greedy_func,
        "eagle_sample_is_sglangs": own(eu.eagle_sample, eu.__name__),
        "seeded_coins_is_sglangs": own(eu._seeded_verify_coins, eu.__name__),
        "sampling_is_none": verify_sampling.tree_speculative_sampling_target_only is None,
        "sampling_call_site_same": eu.tree_speculative_sampling_target_only
        is verify_sampling.tree_speculative_sampling_target_only,
        "renorm_is_none": [renorm.top_k_renorm_prob is None, renorm.top_p_renorm_prob is None],
        "renorm_call_site_same": [eu.top_k_renorm_prob is renorm.top_k_renorm_prob,
                                  eu.top_p_renorm_prob is renorm.top_p_renorm_prob],
        "greedy_module": getattr(eu.verify_tree_greedy_func, "__module__", None),
        "sampling_module": getattr(eu.tree_speculative_sampling_target_only, "__module__", None),
        "chain_is_sglangs": own(eu.chain_speculative_sampling_triton,
                                "sglang.kernels.ops.speculative.reject_sampling"),
    }


# ------------------------------------------------------------------------------- inputs
def random_trees(gen, b: int, n: int, vocab: int):
    """b random trees of n nodes in SGLang's layout (identity retrieve_index, children in
    ascending local index, parents before children), tokens from a small vocab so that siblings
    repeat, and a target argmax that follows one of a node's children three times in four."""
    import torch

    parents = [[-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
               for _ in range(b)]
    nt = torch.full((b, n), -1, dtype=torch.int64)
    ns = torch.full((b, n), -1, dtype=torch.int64)
    for r, par in enumerate(parents):
        last_child = {}
        for i in range(1, n):
            p = par[i]
            if p in last_child:
                ns[r, last_child[p]] = i
            else:
                nt[r, p] = i
            last_child[p] = i
    cand = torch.randint(0, vocab, (b, n), generator=gen)
    predict = torch.randint(0, vocab, (b, n), generator=gen)
    follow = torch.rand((b, n), generator=gen) < 0.75
    for r, par in enumerate(parents):
        kids: dict[int, list[int]] = {}
        for i in range(1, n):
            kids.setdefault(par[i], []).append(i)
        for node, children in kids.items():
            if follow[r, node]:
                pick = children[int(torch.randint(0, len(children), (1,), generator=gen))]
                predict[r, node] = cand[r, pick]
    index = torch.arange(b * n, dtype=torch.int64).view(b, n)
    return cand, index, nt, ns, predict


def chain_inputs(gen, b: int, n: int, vocab: int):
    """b chains of n nodes (topk = 1): target rows p, each draft drawn from its parent's p, the
    one-hot q of that draw (what a greedy top-1 drafter proposes), and the coins."""
    import torch

    p = torch.softmax(torch.randn((b, n, vocab), generator=gen) * 2.0, -1)
    cand = torch.zeros((b, n), dtype=torch.int64)
    cand[:, 0] = torch.randint(0, vocab, (b,), generator=gen)
    for i in range(1, n):
        cand[:, i] = torch.multinomial(p[:, i - 1], 1, generator=gen).squeeze(1)
    q = torch.zeros_like(p)
    q[:, :-1].scatter_(2, cand[:, 1:, None], 1.0)
    nt = torch.full((b, n), -1, dtype=torch.int64)
    nt[:, :-1] = torch.arange(1, n)
    ns = torch.full((b, n), -1, dtype=torch.int64)
    index = torch.arange(b * n, dtype=torch.int64).view(b, n)
    coins = torch.rand((b, n), generator=gen)
    final = torch.rand((b,), generator=gen)
    return cand, index, nt, ns, p, q, coins, final


def sglang_outputs(b: int, n: int, slots: int):
    import torch

    return (torch.zeros(b * n, dtype=torch.int32), torch.full((b, slots), -1, dtype=torch.int32),
            torch.zeros(b, dtype=torch.int32))


def same_outputs(ours, theirs, *, final: bool = True) -> list[bool]:
    """Per request: the accepted path (accept_index), its count and the predicts on it agree;
    with `final=False` the predicts of the accepted drafts only (the acceptance decisions), not
    the last node's, which holds the final token."""
    import torch

    pred_a, acc_a, num_a = ours
    pred_b, acc_b, num_b = theirs
    b = acc_a.shape[0]
    out = []
    for r in range(b):
        path = acc_a[r][acc_a[r] >= 0].to(torch.int64)
        if not final:
            path = path[:-1]
        out.append(bool(torch.equal(acc_a[r], acc_b[r]) and num_a[r] == num_b[r]
                        and torch.equal(pred_a[path], pred_b[path])))
    return out


def same_decisions(ours, theirs) -> list[bool]:
    """Per request: the same acceptance decisions (path, count, accepted drafts)."""
    return same_outputs(ours, theirs, final=False)


# ------------------------------------------------------------------------------- comparisons
def greedy_oracle(gen, batches: list[list[int]]) -> dict:
    """The substituted greedy kernel (as eagle_sample's module binds it) against SGLang's
    Triton verify_tree_greedy_triton, on random trees; per batch (b, N, depth)."""
    import sglang.srt.speculative.eagle_utils as eu
    from sglang.kernels.ops.speculative.spec_tree import verify_tree_greedy_triton

    agree, total, accepted = 0, 0, [0] * 16
    for b, n, depth in batches:
        cand, index, nt, ns, predict = random_trees(gen, b, n, 3)
        ours = sglang_outputs(b, n, depth + 1)
        eu.verify_tree_greedy_func(*ours, cand, index, nt, ns, predict, topk=2)
        theirs = sglang_outputs(b, n, depth + 1)
        verify_tree_greedy_triton(*theirs, cand, index, nt, ns, predict)
        flags = same_outputs(ours, theirs)
        agree += sum(flags)
        total += len(flags)
        for count in ours[2].tolist():
            accepted[count] += 1
    return {"agree": agree, "total": total, "accepted_histogram": accepted}


def sglang_chain_kernel():
    """SGLang's own chain kernel (the substitution wraps the name; the wrapper keeps it)."""
    from sglang.kernels.ops.speculative import reject_sampling

    kernel = reject_sampling.chain_speculative_sampling_triton
    return getattr(kernel, "__wrapped__", kernel)


def chain_oracle(gen, b: int, n: int, vocab: int) -> dict:
    """On the same uniforms, the acceptance decisions of SGLang's Triton
    chain_speculative_sampling_triton against (a) the substituted target-only kernel (q
    one-hot: the rules coincide), (b) specreg's recursive rejection sampling with the same
    general q, and (c) the substituted chain kernel as eagle_sample calls it in
    rejection-sampling mode (SGLang's [b, N - 1, V] draft rows). The final tokens are not
    compared (specreg's own exact draw on its stream)."""
    import sglang.srt.speculative.eagle_utils as eu
    import torch
    from specreg.kernels.tree_verify_sampling import verify_tree_sampling

    from specreg.adapters.sglang_tree_kernels import write_outputs

    theirs_fn = sglang_chain_kernel()
    out = {}
    cand, index, nt, ns, p, q, coins, final = chain_inputs(gen, b, n, vocab)
    theirs = sglang_outputs(b, n, n)
    theirs_fn(*theirs, cand, index, nt, ns, coins, final, p, q, 1.0, 1.0, True)
    ours = sglang_outputs(b, n, n)
    eu.tree_speculative_sampling_target_only(*ours, cand, index, nt, ns, coins, final, p,
                                             torch.zeros_like(p), 1.0, 1.0, True)
    flags = same_decisions(ours, theirs)
    out["target_only"] = {"agree": sum(flags), "total": len(flags),
                          "accepted_mean": float(ours[2].float().mean())}
    # general q: drafts drawn from a q of their own
    q = torch.softmax(torch.randn((b, n, vocab), generator=gen) * 2.0, -1)
    q[:, -1] = 0.0
    for i in range(1, n):
        cand[:, i] = torch.multinomial(q[:, i - 1], 1, generator=gen).squeeze(1)
    theirs = sglang_outputs(b, n, n)
    theirs_fn(*theirs, cand, index, nt, ns, coins, final, p, q, 1.0, 1.0, True)
    result = verify_tree_sampling(cand, index, nt, ns, p, depth=n - 1, draft_probs=q,
                                  coins=coins, generator=gen)
    ours = sglang_outputs(b, n, n)
    write_outputs(result, *ours)
    flags = same_decisions(ours, theirs)
    out["rejection"] = {"agree": sum(flags), "total": len(flags),
                        "accepted_mean": float(ours[2].float().mean())}
    ours = sglang_outputs(b, n, n)
    eu.chain_speculative_sampling_triton(
        predicts=ours[0], accept_index=ours[1], accept_token_num=ours[2], candidates=cand,
        retrive_index=index, retrive_next_token=nt, retrive_next_sibling=ns,
        uniform_samples=coins, uniform_samples_for_final_sampling=final, target_probs=p,
        draft_probs=q[:, :-1].contiguous(), threshold_single=1.0, threshold_acc=1.0,
        deterministic=True)
    flags = same_decisions(ours, theirs)
    out["chain_substituted"] = {"agree": sum(flags), "total": len(flags)}
    return out


def renorm_oracle(gen, rows: int, vocab: int) -> dict:
    """The substituted top-k / top-p renorm against SGLang's Triton renorm (its ROCm fallback,
    FlashInfer's semantics) with its CUDA-tensor guard lifted: same kept set, same values."""
    import sglang.kernels.ops.sampling.renorm_triton as renorm_triton
    import sglang.srt.speculative.eagle_utils as eu
    import torch

    renorm_triton._prepare_probs = lambda probs: probs.float().contiguous()
    probs = torch.softmax(torch.randn((rows, vocab), generator=gen) * 3.0, -1)
    ks = torch.randint(1, vocab + 1, (rows,), generator=gen)
    ks[::7] = 1 << 30  # SGLang's TOP_K_ALL
    ps = torch.rand((rows,), generator=gen) * 0.95 + 0.05
    ps[::5] = 1.0
    out = {}
    for name, ours_fn, theirs_fn, arg in (
        ("top_k", eu.top_k_renorm_prob, renorm_triton.top_k_renorm_probs_triton, ks),
        ("top_p", eu.top_p_renorm_prob, renorm_triton.top_p_renorm_probs_triton, ps),
    ):
        ours, theirs = ours_fn(probs, arg), theirs_fn(probs, arg)
        same_set = ((ours > 0) == (theirs > 0)).all(-1)
        close = (ours - theirs).abs().amax(-1) <= 1e-6
        out[name] = {"agree": int((same_set & close).sum()), "total": rows,
                     "kept_mean": float((ours > 0).sum(-1).float().mean())}
    return out


def murmur_oracle(gen, rows: int, cols: int) -> dict:
    """specreg's torch port of SGLang's seeded-coin hash against SGLang's Triton
    murmur_hash32_kernel, on random 63-bit seeds and positions."""
    import torch
    import triton
    from sglang.kernels.ops.sampling.murmur_hash import murmur_hash32_kernel

    from specreg.adapters.sglang_seeded_coins import murmur_hash32

    seeds = torch.randint(0, 2**63 - 1, (rows,), generator=gen, dtype=torch.int64)
    seeds[:4] = torch.tensor([0, 1, 42, 2**32 + 7])
    positions = torch.randint(0, 2**31 - 1, (rows,), generator=gen, dtype=torch.int64)
    col_index = torch.arange(cols, dtype=torch.int64)
    theirs = torch.empty((rows, cols), dtype=torch.uint32)
    murmur_hash32_kernel[(rows, triton.cdiv(cols, 1024))](
        seeds.to(torch.uint64), positions.to(torch.uint64), col_index, theirs, rows, cols,
        BLOCK_SIZE=1024)
    ours = murmur_hash32(seeds, positions, col_index)
    same = (ours == theirs.to(torch.int64)).all(-1)
    return {"agree": int(same.sum()), "total": rows}


def verify_input(b: int, tokens, next_token, next_sibling, depth: int):
    import torch

    n = len(tokens) if not isinstance(tokens, torch.Tensor) else tokens.shape[1]
    cand = torch.as_tensor(tokens).reshape(-1, n).expand(b, n).reshape(-1).clone()
    return SimpleNamespace(
        draft_token=cand, draft_token_num=n, max_tree_depth=depth + 1,
        retrieve_index=torch.arange(b * n).view(b, n),
        retrieve_next_token=torch.as_tensor(next_token).reshape(-1, n).expand(b, n).clone(),
        retrieve_next_sibling=torch.as_tensor(next_sibling).reshape(-1, n).expand(b, n).clone(),
        tree_topk=2, draft_probs=None,
    )


def sampling_info(b: int, vocab: int, *, greedy: bool, params=SCENARIO_PARAMS, seeds=None):
    import torch
    from sglang.srt.sampling.sampling_batch_info import SamplingBatchInfo

    temperature, top_k, top_p, min_p = params
    return SamplingBatchInfo(
        temperatures=torch.full((b, 1), temperature), top_ps=torch.full((b,), top_p),
        top_ks=torch.full((b,), top_k, dtype=torch.int32), min_ps=torch.full((b,), min_p),
        is_all_greedy=greedy, is_any_greedy=greedy, need_top_p_sampling=top_p < 1,
        need_top_k_sampling=True, need_min_p_sampling=min_p > 0, vocab_size=vocab,
        device="cpu", sampling_seed=seeds,
    )


def run_eagle_sample(vi, info, logits, seq_lens):
    import sglang.srt.speculative.eagle_utils as eu
    from sglang.srt.model_executor.forward_batch_info import ForwardMode

    batch = SimpleNamespace(device="cpu", forward_mode=ForwardMode.DECODE, seq_lens=seq_lens,
                            sampling_info=info, return_logprob=False)
    return eu.eagle_sample(vi, batch, SimpleNamespace(next_token_logits=logits.clone()))


def first_tokens(predict, accept_index) -> list[int]:
    return predict[accept_index[:, 0].long()].tolist()


def chi_square_counts(samples: int) -> dict:
    """eagle_sample on `samples` identical requests of the scenario tree; the histogram of the
    first emitted token, lossless (thresholds 1) and, as a negative control, with SGLang's
    lossy acceptance threshold 0.3."""
    import torch
    from sglang.srt.runtime_context import get_spec

    n, vocab = len(SCENARIO_TOKENS), len(SCENARIO_LOGITS)
    torch.manual_seed(1234)
    logits = torch.tensor(SCENARIO_LOGITS).expand(samples * n, vocab).clone()
    logits[1::n] = torch.tensor(SCENARIO_LOGITS).flip(0)  # node 1's row differs from the root's
    vi = verify_input(samples, SCENARIO_TOKENS, SCENARIO_NEXT, SCENARIO_SIBLING, 3)
    seq_lens = torch.full((samples,), 9)
    out = {}
    for name, threshold in (("lossless", 1.0), ("threshold_acc_0.3", 0.3)):
        with get_spec().override(speculative_accept_threshold_acc=threshold):
            predict, lens, accept_index = run_eagle_sample(
                vi, sampling_info(samples, vocab, greedy=False), logits, seq_lens)
        counts = torch.bincount(torch.tensor(first_tokens(predict, accept_index)),
                                minlength=vocab).tolist()
        out[name] = {"counts": counts, "accept_mean": float((lens - 1).float().mean())}
    return out


def eagle_sample_greedy(gen, b: int, n: int, vocab: int, depth: int) -> dict:
    """eagle_sample on an all-greedy batch of random trees; what it returns against SGLang's
    Triton greedy kernel on the logits' argmax."""
    import torch
    from sglang.kernels.ops.speculative.spec_tree import verify_tree_greedy_triton

    cand, index, nt, ns, predict = random_trees(gen, b, n, vocab)
    logits = torch.randn((b * n, vocab), generator=gen)
    logits.view(b, n, vocab).scatter_(2, predict[:, :, None], 10.0)
    vi = verify_input(b, cand, nt, ns, depth)
    got = run_eagle_sample(vi, sampling_info(b, vocab, greedy=True), logits, torch.full((b,), 7))
    theirs = sglang_outputs(b, n, depth + 1)
    verify_tree_greedy_triton(*theirs, cand, index, nt, ns, predict)
    ours = (got[0], got[2], got[1] - 1)
    flags = same_outputs(ours, theirs)
    return {"agree": sum(flags), "total": b, "accept_lens": got[1].tolist()[:8],
            "root_slot": got[2][:, 0].tolist()[:8]}


def eagle_sample_rejection(gen, b: int, n: int, vocab: int) -> dict:
    """eagle_sample with --speculative-use-rejection-sampling on seeded chains (temperature 0.7,
    no other filter): its acceptance decisions against SGLang's own Triton chain kernel on the
    same target rows, draft rows and seeded coins (SGLang's hash, as the murmur oracle checks);
    its final tokens against specreg's kernel keyed as the substitution documents (key = the
    request's sampling_seed, positions = seq_lens + 1), so the seeds and lengths reach it."""
    import sglang.srt.speculative.eagle_utils as eu
    import torch
    from sglang.srt.runtime_context import get_spec
    from specreg.kernels.tree_verify_sampling import verify_tree_sampling

    from specreg.adapters.sglang_tree_kernels import write_outputs

    cand, index, nt, ns, p, q, _, _ = chain_inputs(gen, b, n, vocab)
    q = torch.softmax(torch.randn((b, n, vocab), generator=gen) * 2.0, -1)
    for i in range(1, n):
        cand[:, i] = torch.multinomial(q[:, i - 1], 1, generator=gen).squeeze(1)
    logits = (p.log() * 0.7).reshape(b * n, vocab)  # softmax(logits / 0.7) = p
    vi = verify_input(b, cand, nt, ns, n - 1)
    vi.tree_topk, vi.draft_probs = 1, q[:, :-1].contiguous()
    seeds = torch.arange(7, 7 + b, dtype=torch.int64)
    seq_lens = torch.randint(5, 50, (b,), generator=gen)
    info = sampling_info(b, vocab, greedy=False, params=(0.7, 1 << 30, 1.0, 0.0), seeds=seeds)
    info.need_top_k_sampling = False
    with get_spec().override(speculative_use_rejection_sampling=True):
        got = run_eagle_sample(vi, info, logits, seq_lens)
    coins, final = eu._seeded_verify_coins(sampling_seed=seeds, seq_lens=seq_lens,
                                           draft_token_num=n, device="cpu")
    probs = torch.softmax(logits / 0.7, -1).view(b, n, vocab)
    theirs = sglang_outputs(b, n, n)
    sglang_chain_kernel()(*theirs, cand, index, nt, ns, coins, final, probs, vi.draft_probs,
                          1.0, 1.0, True)
    flags = same_decisions((got[0], got[2], got[1] - 1), theirs)
    keyed = verify_tree_sampling(
        cand, index, nt, ns, probs, depth=n - 1,
        draft_probs=torch.cat([vi.draft_probs, vi.draft_probs.new_zeros(b, 1, vocab)], 1),
        coins=coins, keys=seeds, positions=seq_lens.to(torch.int64) + 1,
    )
    mine = sglang_outputs(b, n, n)
    write_outputs(keyed, *mine)
    same_keyed = same_outputs((got[0], got[2], got[1] - 1), mine)
    return {"agree": sum(flags), "total": b, "keyed_same": sum(same_keyed),
            "accepted_mean": float((got[1] - 1).float().mean())}


def seeded(gen, b: int) -> dict:
    """Seeded sampling with min-p on some requests only: a request's tokens are the same alone
    as in the batch (its min-p applied to its own rows, nobody else's), and twice."""
    import torch

    n, vocab = len(SCENARIO_TOKENS), len(SCENARIO_LOGITS)
    logits = torch.randn((b * n, vocab), generator=gen) * 2.0
    seeds = torch.arange(100, 100 + b, dtype=torch.int64)
    seq_lens = torch.randint(5, 50, (b,), generator=gen)
    min_ps = torch.tensor([0.0, 0.3] * (b // 2) + [0.0] * (b % 2))

    def info(rows: slice):
        out = sampling_info(rows.stop - rows.start, vocab, greedy=False, seeds=seeds[rows])
        out.min_ps = min_ps[rows].clone()
        out.need_min_p_sampling = bool((out.min_ps > 0).any())
        return out

    vi = verify_input(b, SCENARIO_TOKENS, SCENARIO_NEXT, SCENARIO_SIBLING, 3)
    batch = run_eagle_sample(vi, info(slice(0, b)), logits, seq_lens)
    again = run_eagle_sample(vi, info(slice(0, b)), logits, seq_lens)
    alone_same = 0
    for r in range(b):
        one = verify_input(1, SCENARIO_TOKENS, SCENARIO_NEXT, SCENARIO_SIBLING, 3)
        single = run_eagle_sample(one, info(slice(r, r + 1)), logits[r * n:(r + 1) * n],
                                  seq_lens[r:r + 1])
        rows = batch[2][r][batch[2][r] >= 0].long()
        alone_same += int(torch.equal(single[1], batch[1][r:r + 1])
                          and torch.equal(single[0][(single[2][0][single[2][0] >= 0]).long()],
                                          batch[0][rows]))
    return {"alone_same": alone_same, "total": b,
            "repeat_same": all(torch.equal(x, y) for x, y in zip(batch, again, strict=True)),
            "emitted": first_tokens(batch[0], batch[2])}


def bad_inputs() -> dict:
    """The codes specreg's validation gives for bad input at SGLang's call sites."""
    import sglang.srt.speculative.eagle_utils as eu
    import torch

    from specreg.errors import SpecRegError

    b, n, vocab = 2, 4, 8
    cand, index = torch.zeros((b, n), dtype=torch.int64), torch.arange(b * n).view(b, n)
    nt = torch.tensor([[1, 2, 3, -1]] * b)
    ns = torch.full((b, n), -1)
    probs = torch.full((b, n, vocab), 1.0 / vocab)
    coins, final = torch.rand(b, n), torch.rand(b)

    def code(fn) -> str:
        try:
            fn()
        except SpecRegError as exc:
            return exc.problems[0].code
        except Exception as exc:  # noqa: BLE001 - reported, the test names what it expects
            return type(exc).__name__
        return "accepted"

    bad_links = torch.tensor([[1, 9, 3, -1]] * b)
    nan_probs = probs.clone()
    nan_probs[0, 0, 0] = float("nan")
    return {
        "greedy_link_out_of_range": code(lambda: eu.verify_tree_greedy_func(
            *sglang_outputs(b, n, 4), cand, index, bad_links, ns, cand)),
        "greedy_float_predict": code(lambda: eu.verify_tree_greedy_func(
            *sglang_outputs(b, n, 4), cand, index, nt, ns, cand.float())),
        "greedy_one_slot": code(lambda: eu.verify_tree_greedy_func(
            *sglang_outputs(b, n, 1), cand, index, nt, ns, cand)),
        "sampling_nan_probs": code(lambda: eu.tree_speculative_sampling_target_only(
            *sglang_outputs(b, n, 4), cand, index, nt, ns, coins, final, nan_probs,
            torch.zeros_like(probs), 1.0, 1.0, True)),
        "sampling_coin_one": code(lambda: eu.tree_speculative_sampling_target_only(
            *sglang_outputs(b, n, 4), cand, index, nt, ns, torch.ones(b, n), final, probs,
            torch.zeros_like(probs), 1.0, 1.0, True)),
        "sampling_threshold_zero": code(lambda: eu.tree_speculative_sampling_target_only(
            *sglang_outputs(b, n, 4), cand, index, nt, ns, coins, final, probs,
            torch.zeros_like(probs), 0.0, 1.0, True)),
        "top_k_negative": code(lambda: eu.top_k_renorm_prob(probs[0], torch.tensor([-2] * n))),
        "top_p_zero": code(lambda: eu.top_p_renorm_prob(probs[0], torch.zeros(n))),
        "renorm_negative_probs": code(lambda: eu.top_k_renorm_prob(-probs[0], torch.ones(n))),
    }


def faults(model_path: str) -> dict:
    """SR182 from `install` for a seam SGLang lacks, and for a hook its registry did not apply
    (run last: the second leaves the process half-patched)."""
    import sglang.kernels.ops.speculative.spec_tree as spec_tree
    from sglang.srt.plugins.hook_registry import HookRegistry

    from specreg.adapters import sglang_tree_verify
    from specreg.errors import PluginError

    out = {}
    saved = spec_tree.verify_tree_greedy_func
    del spec_tree.verify_tree_greedy_func
    try:
        sglang_tree_verify.install(None)
        out["missing_seam"] = "accepted"
    except PluginError as exc:
        out["missing_seam"] = [exc.problems[0].code, exc.problems[0].field]
    spec_tree.verify_tree_greedy_func = saved
    HookRegistry.apply_hooks = classmethod(lambda cls: None)  # a registry that applies nothing
    try:
        sglang_tree_verify.install(None)
        out["not_applied"] = "accepted"
    except PluginError as exc:
        out["not_applied"] = [exc.problems[0].code, exc.problems[0].field]
    return out


def run(payload: dict) -> dict:
    logging.getLogger().setLevel(logging.CRITICAL)
    messages: list[str] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = lambda record: messages.append(record.getMessage())  # type: ignore[method-assign]
    logging.getLogger("specreg.adapters").addHandler(handler)
    logging.getLogger("specreg.adapters").setLevel(logging.WARNING)
    import torch
    from sglang.srt.plugins import load_plugins

    load_plugins()
    from specreg.adapters import substitution_runtime

    publish_server_args(payload["model_path"])
    import sglang.srt.speculative.eagle_utils  # noqa: F401 - as a worker loads it

    sizes = payload["sizes"]
    gen = torch.Generator().manual_seed(20)
    out = {"active": list(substitution_runtime.active()), "names": names_now(),
           "log": [m for m in messages if "substitutions active" in m]}
    if payload["mode"] == "off":
        greedy = run_eagle_sample(verify_input(2, [1, 2, 3, 4], [1, 2, 3, -1], [-1] * 4, 3),
                                  sampling_info(2, 8, greedy=True), torch.randn(8, 8),
                                  torch.full((2,), 5))
        out["greedy_root_slot"] = greedy[2][:, 0].tolist()
        try:
            run_eagle_sample(verify_input(2, [1, 2, 3, 4], [1, 2, 3, -1], [-1] * 4, 3),
                             sampling_info(2, 8, greedy=False), torch.randn(8, 8),
                             torch.full((2,), 5))
            out["sampling"] = "ran"
        except TypeError as exc:
            out["sampling"] = f"TypeError: {exc}"
        out["faults"] = faults(payload["model_path"])
    else:
        sections = (
            ("greedy_oracle", greedy_oracle, (sizes["greedy_batches"],)),
            ("chain_oracle", chain_oracle, sizes["chain"]),
            ("renorm_oracle", renorm_oracle, sizes["renorm"]),
            ("murmur_oracle", murmur_oracle, sizes["murmur"]),
            ("eagle_sample_greedy", eagle_sample_greedy, sizes["eagle_greedy"]),
            ("seeded", seeded, (sizes["seeded"],)),
            ("eagle_sample_rejection", eagle_sample_rejection, sizes["eagle_rejection"]),
        )
        seconds = {}
        for name, fn, args in sections:
            started = time.perf_counter()
            out[name] = fn(gen, *args)
            seconds[name] = round(time.perf_counter() - started, 2)
        out["chi_square"] = chi_square_counts(sizes["chi_square_samples"])
        out["bad_inputs"] = bad_inputs()
        out["seconds"] = seconds
    return out


def preload() -> None:
    """What both runs import before loading the plugins (one_import.py): torch and SGLang's
    plugin loader, which brings most of SGLang."""
    import sglang.srt.plugins  # noqa: F401
    import torch  # noqa: F401


def main() -> None:
    if "--runs" in sys.argv:  # both modes in one process (one_import.py)
        import one_import

        one_import.main(preload, run)
        return
    out = run(json.load(sys.stdin))
    sys.stdout.write("\n" + json.dumps(out) + "\n")


if __name__ == "__main__":
    main()
