"""Per-request draft lengths: what a mixed batch costs against the same batch padded to its
longest row, and against what a user would do instead.

    python benchmarks/bench_draft_lengths.py              # b=64, n=8, V=16384, one thread
    python benchmarks/bench_draft_lengths.py --b 16 --v 4096 --repeats 3

A batch whose requests ask for 0..gamma drafts (uniform, one of them at gamma) verifies with
`draft_lengths=` at the plan's width. From one run (best of --repeats, interleaved, CPU time of
one torch thread), per rule, torch path:

- `padded`: the same batch with every request at the longest length (no `draft_lengths`): the
  cost a fixed-width verify pays anyway; the issue asks mixed <= padded;
- `mixed`: the batch with its own lengths through `ChainVerifier(...,
  draft_lengths=)` / `verify_tree_*(..., draft_lengths=)` (their validation, and for trees the
  depth computation and cut, included);
- `grouped`: what a user without per-request lengths would do: one verify call per distinct
  length, on the sub-batch of its requests, at that width (chains only: a tree of a given depth
  is not a prefix slice).

Under Triton's interpreter (no GPU) it counts the bytes the chain and tree sampling kernels
load for the mixed and the padded batch (`bench_traffic.Traffic`): RATIO lines "traffic".
"""

from __future__ import annotations

import argparse

import bench_traffic  # noqa: F401  (sets TRITON_INTERPRET before triton is imported)
import torch
from bench_traffic import TRAFFIC, _install
from floors import interleaved_best
from specreg.kernels.tree_verify_greedy import verify_tree_greedy
from specreg.kernels.tree_verify_sampling import verify_tree_sampling

from specreg.step.chain_verifier import ChainVerifier
from specreg.kernels.chain import verify_chain_greedy, verify_chain_sampling


def chain_inputs(b: int, n: int, vocab: int, seed: int = 0) -> dict[str, torch.Tensor]:
    """Peaked rows; drafts that agree with the target's argmax 80% of the time (long rows
    accept deep, so the padded batch reads what a real one would)."""
    gen = torch.Generator().manual_seed(seed)
    logits = 4 * torch.randn(b, n, vocab, generator=gen)
    p = torch.softmax(logits, -1)
    q = torch.softmax(logits[:, :-1] + torch.randn(b, n - 1, vocab, generator=gen), -1)
    candidates = torch.randint(0, vocab, (b, n), generator=gen)
    agree = torch.rand(b, n - 1, generator=gen) < 0.8
    candidates[:, 1:] = torch.where(agree, p[:, :-1].argmax(-1), candidates[:, 1:])
    lengths = torch.randint(0, n, (b,), generator=gen)
    lengths[0] = n - 1
    return dict(candidates=candidates, logits=logits, p=p, q=q, lengths=lengths,
                coins=torch.rand(b, n - 1, generator=gen),
                keys=torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
                positions=torch.randint(0, 4096, (b,), generator=gen))


def grouped(x: dict[str, torch.Tensor], sampling: bool) -> None:
    """One verify per distinct length on its requests' prefix: the alternative."""
    for length in x["lengths"].unique().tolist():
        rows = (x["lengths"] == length).nonzero().flatten()
        width = length + 1
        candidates = x["candidates"][rows, :width]
        if sampling:
            verify_chain_sampling(candidates, x["p"][rows, :width], x["q"][rows, :length],
                                  coins=x["coins"][rows, :length], keys=x["keys"][rows],
                                  positions=x["positions"][rows], backend="torch")
        else:
            verify_chain_greedy(candidates, x["logits"][rows, :width], backend="torch")


def tree_inputs(b: int, n: int, vocab: int, steps: int, seed: int = 0):
    from specreg_eagle.kernels.select_topk import organize_draft_results, select_top_k_tokens
    from specreg.kernels.tree_build import build_tree

    gen = torch.Generator().manual_seed(seed)
    hidden, scores = torch.randn(b, 3, generator=gen), None
    probs = torch.softmax(3 * torch.randn(b, vocab, generator=gen), -1)
    lists: tuple[list, list, list] = ([], [], [])
    for i in range(steps):  # the EAGLE draft loop on random draft distributions
        topk_p, topk_index = probs.topk(4, -1)
        _, hidden, scores, info = select_top_k_tokens(i, topk_p, topk_index, hidden, scores, 4)
        for kept, value in zip(lists, info[:3], strict=True):
            kept.append(value)
        probs = torch.softmax(3 * torch.randn(b * 4, vocab, generator=gen), -1)
    parent_list, sel, drafts = organize_draft_results(*lists, n)
    tree = build_tree(torch.zeros(b, dtype=torch.int64), parent_list, sel, drafts,
                      torch.full((b,), 8), topk=4, depth=steps, num_verify_tokens=n,
                      mask_mode="qlen_only")
    candidates = tree.draft_tokens.view(b, n)
    links = (candidates, tree.retrieve_index, tree.retrieve_next_token,
             tree.retrieve_next_sibling)
    logits = 4 * torch.randn(b, n, vocab, generator=gen)
    child = candidates.gather(1, tree.retrieve_next_token.clamp(min=0))
    logits.scatter_add_(2, child[:, :, None], torch.full((b, n, 1), 30.0))  # deep paths
    lengths = torch.randint(0, steps + 1, (b,), generator=gen)
    lengths[0] = steps
    return links, logits, torch.softmax(logits, -1), lengths, gen


def report(label: str, times: dict[str, float]) -> None:
    base = times["padded"]
    for name, seconds in times.items():
        if name != "padded":
            print(f"RATIO {label}: {name} / padded = {seconds / base:.2f}x "
                  f"({seconds * 1e3:.2f} ms vs {base * 1e3:.2f} ms)")


def run_cpu(b: int, n: int, vocab: int, repeats: int) -> None:
    x = chain_inputs(b, n, vocab)
    verifier = ChainVerifier(n, backend="torch")
    report("chain greedy (torch)", interleaved_best({
        "padded": lambda: verifier.verify_greedy(x["candidates"], x["logits"]),
        "mixed": lambda: verifier.verify_greedy(x["candidates"], x["logits"],
                                                draft_lengths=x["lengths"]),
        "grouped": lambda: grouped(x, False),
    }, repeats))
    coins = dict(coins=x["coins"], keys=x["keys"], positions=x["positions"])
    report("chain sampling (torch)", interleaved_best({
        "padded": lambda: verifier.verify_sampling(x["candidates"], x["p"], x["q"], **coins),
        "mixed": lambda: verifier.verify_sampling(x["candidates"], x["p"], x["q"], **coins,
                                                  draft_lengths=x["lengths"]),
        "grouped": lambda: grouped(x, True),
    }, repeats))
    steps, width = 4, 2 * n
    links, logits, p, lengths, gen = tree_inputs(b, width, vocab, steps)
    report("tree greedy (torch)", interleaved_best({
        "padded": lambda: verify_tree_greedy(*links, depth=steps, target_logits=logits,
                                             backend="torch"),
        "mixed": lambda: verify_tree_greedy(*links, depth=steps, target_logits=logits,
                                            backend="torch", draft_lengths=lengths),
    }, repeats))
    tree_coins = dict(coins=torch.rand(b, width, generator=gen),
                      keys=torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
                      backend="torch")
    report("tree sampling (torch)", interleaved_best({
        "padded": lambda: verify_tree_sampling(*links, p, depth=steps, **tree_coins),
        "mixed": lambda: verify_tree_sampling(*links, p, depth=steps, **tree_coins,
                                              draft_lengths=lengths),
    }, repeats))


def loaded(kernel: str, fn) -> int:
    TRAFFIC.reset()
    fn()
    return TRAFFIC.loaded[kernel]


def run_traffic(b: int, n: int, vocab: int) -> None:
    _install()
    x = chain_inputs(b, n, vocab, seed=1)
    coins = dict(coins=x["coins"], keys=x["keys"], positions=x["positions"], backend="triton")
    kernel = "_chain_sampling_kernel"
    padded = loaded(kernel, lambda: verify_chain_sampling(x["candidates"], x["p"], x["q"], **coins))
    mixed = loaded(kernel, lambda: verify_chain_sampling(
        x["candidates"], x["p"], x["q"], **coins, verify_lens=x["lengths"] + 1))
    print(f"RATIO chain sampling traffic (triton): mixed / padded = {mixed / padded:.2f}x "
          f"({mixed} B vs {padded} B loaded)")
    steps, width = 4, 2 * n
    links, _, p, lengths, gen = tree_inputs(b, width, vocab, steps, seed=1)
    tree_coins = dict(coins=torch.rand(b, width, generator=gen),
                      keys=torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
                      backend="triton")
    kernel = "_tree_sampling_kernel"
    padded = loaded(kernel, lambda: verify_tree_sampling(*links, p, depth=steps, **tree_coins))
    mixed = loaded(kernel, lambda: verify_tree_sampling(*links, p, depth=steps, **tree_coins,
                                                        draft_lengths=lengths))
    if padded:
        print(f"RATIO tree sampling traffic (triton): mixed / padded = {mixed / padded:.2f}x "
              f"({mixed} B vs {padded} B loaded)")
    else:
        print(f"tree sampling traffic: no loads counted under {kernel}: {dict(TRAFFIC.loaded)}")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--b", type=int, default=64)
    parser.add_argument("--n", type=int, default=8)
    parser.add_argument("--v", type=int, default=16384)
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--traffic-b", type=int, default=8)
    parser.add_argument("--traffic-v", type=int, default=2048)
    args = parser.parse_args()
    torch.set_num_threads(1)
    print(f"b={args.b} n={args.n} V={args.v}; lengths uniform in 0..{args.n - 1}")
    run_cpu(args.b, args.n, args.v, args.repeats)
    run_traffic(args.traffic_b, args.n, args.traffic_v)


if __name__ == "__main__":
    main()
