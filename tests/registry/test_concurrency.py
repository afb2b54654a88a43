"""16 threads (and spawn/fork children) resolving configs and running the CPU kernels agree
with a single-threaded run."""

from __future__ import annotations

import multiprocessing
from concurrent.futures import ThreadPoolExecutor

import pytest
import torch

CONFIGS = [
    {"algorithm": "eagle", "num_steps": 3, "topk": 2, "num_draft_tokens": 5},
    {"algorithm": "eagle3"},
    {"algorithm": "dspark", "num_draft_tokens": 6},
    {"algorithm": "dflash"},
    {"algorithm": "eagle", "cache": "hisparse",
     "cache_options": {"top_k": 8, "hot_size": 16, "req_slots": 2, "max_seq_len": 64}},
]  # fmt: skip


def _work(seed: int) -> dict:
    """Resolve every config and run chain verify, build_tree + tree verify and a Markov step."""
    from specreg_dspark.kernels.markov_greedy import markov_greedy_step
    from specreg_eagle.kernels.select_topk import organize_draft_results, select_top_k_tokens
    from specreg.kernels.tree_build import build_tree
    from specreg.kernels.tree_verify_greedy import verify_tree_greedy

    from specreg import Registry
    from specreg.kernels.chain import verify_chain_greedy, verify_chain_sampling

    registry = Registry.load()
    widths = [registry.resolve(c).resolution.widths_dict() for c in CONFIGS]
    gen = torch.Generator().manual_seed(seed)
    b, n, v, k, s = 3, 4, 11, 2, 3
    cand = torch.randint(0, v, (b, n), generator=gen)
    logits = torch.randn(b, n, v, generator=gen)
    probs = torch.softmax(logits, -1)
    greedy = verify_chain_greedy(cand, logits)
    keys = torch.arange(b) + 1000 * seed  # one stream key per request, fixed by the seed
    sampled = verify_chain_sampling(cand, probs, probs[:, 1:], keys=keys,
                                    positions=torch.full((b,), seed))
    hidden, scores, lists = torch.zeros(b, 2), None, ([], [], [])
    topk_p, topk_i = torch.rand(b, k, generator=gen), torch.randint(0, v, (b, k), generator=gen)
    for i in range(s):
        _, hidden, scores, info = select_top_k_tokens(i, topk_p, topk_i, hidden, scores, k)
        for out, part in zip(lists, info, strict=True):
            out.append(part)
        topk_p = torch.rand(b * k, k, generator=gen)
        topk_i = torch.randint(0, v, (b * k, k), generator=gen)
    parents, top_idx, draft = organize_draft_results(*lists, 5)
    tree = build_tree(cand[:, 0], parents, top_idx, draft, torch.tensor([3, 5, 7]),
                      topk=k, depth=s, num_verify_tokens=5)  # fmt: skip
    tree_logits = torch.randn(b, 5, v, generator=gen)
    tverify = verify_tree_greedy(tree.draft_tokens.view(b, 5), tree.retrieve_index,
                                 tree.retrieve_next_token, tree.retrieve_next_sibling,
                                 depth=s, target_logits=tree_logits)  # fmt: skip
    w1, w2 = torch.randn(v, 3, generator=gen), torch.randn(v, 3, generator=gen)
    markov = markov_greedy_step(logits[:, 0], cand[:, 0], w1, w2)
    return {
        "widths": widths,
        "greedy": (greedy.accept_len.tolist(), greedy.output_tokens.tolist()),
        "sampled": (sampled.accept_len.tolist(), sampled.output_tokens.tolist()),
        "tree": (tree.retrieve_index.tolist(), tree.tree_mask.tolist()),
        "tree_verify": (tverify.accept_len.tolist(), tverify.bonus.tolist()),
        "markov": markov.tolist(),
    }


def test_sixteen_threads_match_a_single_thread():
    seeds = list(range(32))
    expected = [_work(seed) for seed in seeds]
    with ThreadPoolExecutor(max_workers=16) as pool:
        got = list(pool.map(_work, seeds))
    assert got == expected


def _child(queue, seed: int, threads: int | None) -> None:
    if threads is not None:
        # A forked child must not enter the OpenMP pool the parent already started (libgomp
        # deadlocks after fork); one intra-op thread keeps torch out of it.
        torch.set_num_threads(threads)
    try:
        queue.put(("ok", _work(seed)))
    except BaseException as exc:  # report to the parent instead of dying silently
        queue.put(("error", repr(exc)))


@pytest.mark.parametrize("method", ["spawn", "fork"])
def test_child_process_loads_resolves_and_runs_a_kernel(method):
    if method not in multiprocessing.get_all_start_methods():
        pytest.fail(f"start method {method} unavailable on this platform")
    expected = _work(7)
    ctx = multiprocessing.get_context(method)
    queue = ctx.Queue()
    proc = ctx.Process(target=_child, args=(queue, 7, 1 if method == "fork" else None))
    proc.start()
    status, result = queue.get(timeout=60)
    proc.join(timeout=60)
    assert proc.exitcode == 0
    assert status == "ok", result
    assert result == expected
