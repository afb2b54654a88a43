"""Global-memory traffic of the Triton kernels, counted under Triton's interpreter (no GPU).

    python benchmarks/bench_traffic.py [--batch 8] [--n 6] [--vocab 8192]

Every `tl.load` / `tl.store` a kernel executes is counted: the masked-in elements times their
size (the bytes it moves), and the distinct addresses among them (the bytes it touches). For the
verify kernels the bytes the rule must read come from the result itself: a greedy chain must read
every logits row up to and including the first mismatch; a sampling chain must read the target
and draft probability of each accepted token and, at the stop position, the whole target row (the
bonus) or the whole target and draft rows (the residual of a rejection); a tree likewise along its
accepted path, plus the rows at the node where it stops. Each kernel prints

    TRAFFIC <kernel>: loaded <B> B, distinct <B> B, must read <B> B -> <x>x the rule, <y>x distinct

On a GPU, loads beyond the distinct bytes are L2 hits at best; beyond the rule's bytes they are
work the rule did not need. Small index and coin arrays are counted in both.
"""

from __future__ import annotations

import argparse
import os
from collections import defaultdict

os.environ["TRITON_INTERPRET"] = "1"  # before triton is imported

import numpy as np  # noqa: E402
import torch  # noqa: E402
from specreg.kernels.tree_verify_greedy import verify_tree_greedy  # noqa: E402
from specreg.kernels.tree_verify_sampling import verify_tree_sampling  # noqa: E402
from triton.runtime import interpreter  # noqa: E402

from specreg.kernels.argmax import row_argmax_triton  # noqa: E402
from specreg.kernels.chain import verify_chain_greedy, verify_chain_sampling  # noqa: E402


class Traffic:
    """Loads and stores per kernel name, filled by the patched interpreter builder."""

    def __init__(self) -> None:
        self.kernel = "?"
        self.loaded = defaultdict(int)
        self.stored = defaultdict(int)
        self.addresses: dict[str, list[np.ndarray]] = defaultdict(list)
        self.itemsize: dict[str, int] = {}

    def load(self, ptrs, mask) -> None:
        size = interpreter._get_np_dtype(ptrs.get_element_ty()).itemsize
        addresses = ptrs.data if mask is None else ptrs.data[mask.data.astype(bool)]
        addresses = np.asarray(addresses, dtype=np.uint64).ravel()
        self.loaded[self.kernel] += addresses.size * size
        # Byte addresses of every element, so elements of different sizes count exactly.
        spans = (addresses[:, None] + np.arange(size, dtype=np.uint64)[None, :]).ravel()
        self.addresses[self.kernel].append(spans)

    def store(self, ptrs, mask) -> None:
        size = interpreter._get_np_dtype(ptrs.get_element_ty()).itemsize
        count = ptrs.data.size if mask is None else int(mask.data.astype(bool).sum())
        self.stored[self.kernel] += count * size

    def distinct(self, kernel: str) -> int:
        parts = self.addresses.get(kernel)
        return int(np.unique(np.concatenate(parts)).size) if parts else 0

    def reset(self) -> None:
        self.__init__()


TRAFFIC = Traffic()


def _install() -> None:
    builder = interpreter.interpreter_builder
    masked_load, plain_load = builder.create_masked_load, builder.create_load
    masked_store, plain_store = builder.create_masked_store, builder.create_store

    def create_masked_load(ptrs, mask, *args):
        TRAFFIC.load(ptrs, mask)
        return masked_load(ptrs, mask, *args)

    def create_load(ptr, *args):
        TRAFFIC.load(ptr, None)
        return plain_load(ptr, *args)

    def create_masked_store(ptrs, value, mask, *args):
        TRAFFIC.store(ptrs, mask)
        return masked_store(ptrs, value, mask, *args)

    def create_store(ptr, value, *args):
        TRAFFIC.store(ptr, None)
        return plain_store(ptr, value, *args)

    builder.create_masked_load, builder.create_load = create_masked_load, create_load
    builder.create_masked_store, builder.create_store = create_masked_store, create_store
    call = interpreter.GridExecutor.__call__

    def grid_call(self, *args, **kwargs):
        TRAFFIC.kernel = self.fn.__name__
        return call(self, *args, **kwargs)

    interpreter.GridExecutor.__call__ = grid_call


def report(label: str, kernel: str, must_read: int) -> float:
    loaded, distinct = TRAFFIC.loaded[kernel], TRAFFIC.distinct(kernel)
    multiple = loaded / must_read
    print(f"TRAFFIC {label}: loaded {loaded} B, distinct {distinct} B, must read {must_read} B "
          f"-> {multiple:.2f}x the rule, {loaded / max(distinct, 1):.2f}x distinct")  # fmt: skip
    TRAFFIC.reset()
    return multiple


def chain_inputs(b: int, n: int, vocab: int, seed: int = 0):
    gen = torch.Generator().manual_seed(seed)
    p = torch.softmax(3 * torch.randn(b, n, vocab, generator=gen), -1)
    q = torch.softmax(3 * torch.randn(b, n - 1, vocab, generator=gen), -1)
    candidates = torch.randint(0, vocab, (b, n), generator=gen)
    agree = torch.rand(b, n - 1, generator=gen) < 0.7  # partly accepted chains
    candidates[:, 1:] = torch.where(agree, p[:, :-1].argmax(-1), candidates[:, 1:])
    coins = torch.rand(b, n - 1, generator=gen)
    stream = {"keys": torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
              "positions": torch.randint(0, 4096, (b,), generator=gen)}
    return candidates, p, q, coins, stream


def chain_sampling_rule(accept: torch.Tensor, n: int, vocab: int, has_q: bool) -> int:
    """Bytes of p and q the chain rule reads (float32), plus candidates, coins, the request's
    key and position (int64, f32, int64)."""
    total = 0
    for a in accept.tolist():
        tested = min(a + 1, n - 1)  # drafts whose coin was tossed (the last one rejected, if any)
        total += tested * 4 * (2 if has_q else 1)  # p(x), q(x) per tested draft
        rows = (2 if has_q else 1) if a < n - 1 else 1  # residual rows, or the bonus row
        total += rows * vocab * 4
        total += n * 8 + (n - 1) * 4 + 2 * 8  # candidates, coins, key and position
    return total


def run_chain(b: int, n: int, vocab: int) -> None:
    candidates, p, q, coins, stream = chain_inputs(b, n, vocab)
    logits = torch.log(p)
    result = verify_chain_greedy(candidates, logits, backend="triton")
    rows = sum(min(a + 1, n) for a in result.accept_len.tolist())
    report("chain greedy", "_chain_greedy_kernel", rows * vocab * 4 + b * n * 8)
    for label, draft in (("chain sampling, with q", q), ("chain sampling, target-only", None)):
        result = verify_chain_sampling(candidates, p, draft, coins=coins, **stream,
                                       backend="triton")  # fmt: skip
        rule = chain_sampling_rule(result.accept_len, n, vocab, draft is not None)
        report(label, "_chain_sampling_kernel", rule)
    rows_in = torch.randn(b * n, vocab)
    row_argmax_triton(rows_in)
    report("row argmax", "_row_argmax_kernel", rows_in.numel() * 4)


def tree_inputs(b: int, vocab: int, seed: int = 0):
    """A two-level tree per request: root 0, children 1..3, grandchildren of node 1 at 4..5."""
    gen = torch.Generator().manual_seed(seed)
    n = 6
    next_token = torch.tensor([1, 4, -1, -1, -1, -1]).repeat(b, 1)
    next_sibling = torch.tensor([-1, 2, 3, -1, 5, -1]).repeat(b, 1)
    retrieve_index = torch.arange(b * n).view(b, n)
    p = torch.softmax(3 * torch.randn(b, n, vocab, generator=gen), -1)
    q = torch.softmax(3 * torch.randn(b, n, vocab, generator=gen), -1)
    candidates = torch.randint(0, vocab, (b, n), generator=gen)
    # Even requests draft the argmax (accepted), odd ones the argmin at node 1 (rejected: its
    # siblings 2 and 3 are tried) and node 4.
    even = (torch.arange(b) % 2 == 0)[:, None]
    for node, parent in ((1, 0), (4, 1)):
        best, worst = p[:, parent].argmax(-1, keepdim=True), p[:, parent].argmin(-1, keepdim=True)
        candidates[:, node] = torch.where(even, best, worst)[:, 0]
    coins = torch.rand(b, n, generator=gen)
    stream = {"keys": torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
              "positions": torch.randint(0, 4096, (b,), generator=gen)}
    links = (candidates, retrieve_index, next_token, next_sibling)
    return links, p, q, coins, stream, n


def tree_rule(result, links, vocab: int, has_q: bool) -> int:
    """Bytes the tree sampling rule reads: p(x) (and q(x)) of every tried draft; with q, the whole
    p and q rows of each node where a child was rejected (the residual max(p - q, 0) needs them);
    the whole p row where the walk stops (the bonus, or the target-only draw without x)."""
    _, _, next_token, next_sibling = links
    n = next_token.shape[1]
    total = 0
    for r, path in enumerate(result.accept_index.tolist()):
        nodes = [i % n for i in path if i >= 0]
        for parent, child in (*zip(nodes, nodes[1:], strict=False), (nodes[-1], -1)):
            tried, node = 0, int(next_token[r, parent])
            while node >= 0 and node != child:
                tried, node = tried + 1, int(next_sibling[r, node])
            total += (tried + (child >= 0)) * 4 * (2 if has_q else 1)
            if has_q and tried:
                total += 2 * vocab * 4
            elif child < 0:
                total += vocab * 4
    return total


def run_tree(b: int, vocab: int) -> None:
    links, p, q, coins, stream, n = tree_inputs(b, vocab)
    result = verify_tree_greedy(*links, depth=2, target_logits=torch.log(p), backend="triton")
    # The logits path reads rows through the argmax kernel, then walks the tree.
    argmax = TRAFFIC.loaded["_row_argmax_kernel"] + TRAFFIC.loaded["_tree_greedy_kernel"]
    TRAFFIC.loaded["_tree_greedy_kernel"] = argmax
    TRAFFIC.addresses["_tree_greedy_kernel"] += TRAFFIC.addresses.pop("_row_argmax_kernel", [])
    # The greedy rule needs the argmax of every node's row (a node's children are known only
    # after it is checked, so all N rows): the whole logits.
    report("EAGLE tree greedy (from logits)", "_tree_greedy_kernel", b * n * vocab * 4)
    for label, draft in (("EAGLE tree sampling, with q", q),
                         ("EAGLE tree sampling, target-only", None)):  # fmt: skip
        result = verify_tree_sampling(*links, p, depth=2, draft_probs=draft, coins=coins,
                                      **stream, backend="triton")  # fmt: skip
        report(label, "_tree_sampling_kernel",
               tree_rule(result, links, vocab, draft is not None))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--n", type=int, default=6)
    ap.add_argument("--vocab", type=int, default=8192)
    a = ap.parse_args()
    _install()
    print(f"b={a.batch} n={a.n} V={a.vocab} (float32 rows; interpreter counts)")
    run_chain(a.batch, a.n, a.vocab)
    run_tree(a.batch, a.vocab)


if __name__ == "__main__":
    main()
