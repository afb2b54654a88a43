"""Tree sampling's compiled CPU path (`numba_impl`, `numba_kernels`, the shared
`specreg.kernels.race_numba`): the torch path's accepted paths, accept counts and final tokens
bit for bit, and the reference's, on many keys and tree shapes (chains, stars, random trees,
EAGLE-like top-k trees; N up to 40, past torch's small-matrix product), small and production
vocabularies, float32 and bfloat16 rows, thresholds, caller coins, ragged draft lengths, invalid
candidate ids and rows without mass or holding NaN (values unchecked); the dispatch (taken on
CPU when the backend is automatic, never with `backend='torch'`, SPECREG_KERNEL_BACKEND=torch,
or with q, which stays on the torch path); malformed links handed to the torch path; inputs
validated before anything runs; and the clean fallback without numba (a subprocess where
`import numba` fails)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import specreg.kernels.tree_verify_sampling as tree
from specreg.errors import KernelInputError
from specreg.kernels.tree_coins import tree_coins
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg.kernels.tree_verify_sampling.reference import verify_tree_sampling_reference
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs

pytest.importorskip("numba")

from specreg.kernels.tree_verify_sampling import numba_impl, numba_kernels  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]
FIELDS = ("predicts", "accept_index", "accept_token_num", "bonus", "output_tokens")


def _links(parents):
    """first-child / next-sibling links [b, N] of parent lists (children in ascending index)."""
    b, n = len(parents), len(parents[0])
    nt = torch.full((b, n), -1, dtype=torch.int64)
    ns = torch.full((b, n), -1, dtype=torch.int64)
    for r, row in enumerate(parents):
        youngest = {}
        for i in range(1, n):
            par = row[i]
            if par in youngest:
                ns[r, youngest[par]] = i
            else:
                nt[r, par] = i
            youngest[par] = i
    return nt, ns


def _parents(shape, b, n, gen):
    if shape == "chain":
        return [[-1] + list(range(n - 1)) for _ in range(b)]
    if shape == "star":
        return [[-1] + [0] * (n - 1) for _ in range(b)]
    if shape == "topk":  # each level: 2 children for every node of the level above
        return [[-1] + [(i - 1) // 2 for i in range(1, n)] for _ in range(b)]
    return [[-1] + [int(torch.randint(0, i, (1,), generator=gen)) for i in range(1, n)]
            for _ in range(b)]


def _inputs(b, n, vocab, seed, shape="random", dtype=torch.float32, peak=6.0):
    """Peaked p rows (mass on few tokens), node tokens drawn from their parent's row (trees
    partly accepted, repeated sibling tokens common), 64-bit keys and positions."""
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, n, vocab, generator=gen) * peak
    p = torch.softmax(logits, -1)
    nt, ns = _links(_parents(shape, b, n, gen))
    drawn = torch.multinomial(p.reshape(b * n, vocab), 1, generator=gen).view(b, n)
    candidates = torch.randint(0, vocab, (b, n), generator=gen)
    for r in range(b):  # node c's token drawn from its parent's row
        stack = [0]
        while stack:
            node = stack.pop()
            child = int(nt[r, node])
            while child >= 0:
                candidates[r, child] = drawn[r, node]
                stack.append(child)
                child = int(ns[r, child])
                drawn[r, node] = torch.multinomial(p[r, node], 1, generator=gen)[0]
    return dict(
        tree=(candidates, torch.arange(b * n).view(b, n), nt, ns),
        target_probs=p.to(dtype),
        keys=torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
        positions=torch.randint(0, 1 << 20, (b,), generator=gen),
    )


def _run(x, backend, depth, check_values=False, **extra):
    return verify_tree_sampling(*x["tree"], x["target_probs"], depth=depth, keys=x["keys"],
                                positions=x["positions"], check_values=check_values,
                                backend=backend, **extra)  # fmt: skip


def _assert_same(a, b):
    for field in FIELDS:
        assert torch.equal(getattr(a, field), getattr(b, field)), field
        assert getattr(a, field).dtype == getattr(b, field).dtype


def _reference(x, depth, coins=None, **thresholds):
    candidates, ridx, nt, ns = x["tree"]
    parent_coins, child_coins = tree_coins(candidates, nt, ns, x["keys"], x["positions"], coins)
    return verify_tree_sampling_reference(TreeSamplingInputs(
        candidates, ridx, nt, ns, x["target_probs"], None, parent_coins, child_coins, x["keys"],
        x["positions"], depth=depth, **thresholds))  # fmt: skip


@pytest.fixture
def compiled_calls(monkeypatch):
    """The calls that took the compiled path."""
    calls = []
    real = tree.verify_tree_sampling_numba

    def spy(inputs):
        calls.append(inputs)
        return real(inputs)

    monkeypatch.setattr(tree, "verify_tree_sampling_numba", spy)
    return calls


def _compare(x, depth, compiled_calls, reference=False, **extra):
    before = len(compiled_calls)
    compiled = _run(x, None, depth, **extra)
    assert len(compiled_calls) == before + 1, "the compiled path was not taken"
    _assert_same(compiled, _run(x, "torch", depth, **extra))
    if reference:
        thresholds = {k: v for k, v in extra.items() if k.startswith("threshold")}
        _assert_same(compiled, _reference(x, depth, extra.get("coins"), **thresholds))
    return compiled


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("shape", ["chain", "star", "topk", "random"])
def test_small_vocabularies_equal_torch_and_the_reference(shape, dtype, compiled_calls):
    """40 keyed batches per shape over vocabularies inside one race block, at its edges and
    across several blocks with a partial last one; N = 1 (the root alone) included."""
    accepted = 0
    for seed in range(40):
        vocab = (1, 5, 127, 128, 129, 300, 1000)[seed % 7]
        n = 1 + seed % 9
        x = _inputs(5, n, vocab, seed, shape, dtype)
        out = _compare(x, 1 + seed % 5, compiled_calls, reference=seed % 3 == 0)
        accepted += int(out.accept_token_num.sum())
    assert accepted > 0


@pytest.mark.parametrize("vocab", [32768, 151936])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_production_vocabularies_equal_torch_and_the_reference(vocab, dtype, compiled_calls):
    """EAGLE-like sizes: N 16 (torch's small-matrix product) and 25, 40 (its general one)."""
    accepted = 0
    for seed, (n, shape) in enumerate([(16, "topk"), (25, "random"), (40, "star")]):
        x = _inputs(4, n, vocab, 200 + seed, shape, dtype, peak=12.0)
        accepted += int(_compare(x, 4, compiled_calls, reference=seed == 0).accept_token_num.sum())
    assert accepted > 0


def test_thresholds_caller_coins_and_draft_lengths(compiled_calls):
    for seed in range(24):
        x = _inputs(6, 12, 300, 300 + seed, ("random", "topk", "star")[seed % 3])
        gen = torch.Generator().manual_seed(seed)
        extra = {}
        if seed % 2:
            extra.update(threshold_single=0.3 + 0.05 * (seed % 5), threshold_acc=0.6)
        if seed % 3 == 0:
            extra["coins"] = torch.rand(6, 12, generator=gen, dtype=torch.float64)
        if seed % 4 == 1:
            extra["draft_lengths"] = torch.randint(0, 5, (6,), generator=gen)
        _compare(x, 4, compiled_calls, reference=seed % 4 == 0, **extra)


def test_invalid_ids_rows_without_mass_and_nonfinite_rows(compiled_calls):
    """Values unchecked: candidate ids -1 and >= V, p rows of zeros, NaN and inf."""
    for seed in range(24):
        x = _inputs(6, 10, 200, 400 + seed, "random")
        gen = torch.Generator().manual_seed(seed)
        cand = x["tree"][0]
        cand[torch.rand(cand.shape, generator=gen) < 0.15] = -1
        cand[torch.rand(cand.shape, generator=gen) < 0.1] = 200 + seed
        p = x["target_probs"]
        p[0, : 1 + seed % 10] = 0.0
        if seed % 3 == 0:
            p[1, seed % 10, seed] = float("nan")
        if seed % 3 == 1:
            p[2, :, 7] = float("inf")
        _compare(x, 3, compiled_calls)


def test_dispatch_keeps_the_torch_path_when_asked_and_with_q(compiled_calls, monkeypatch):
    x = _inputs(4, 8, 300, 7)
    _run(x, "torch", 3)
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "torch")
    _run(x, None, 3)
    q = torch.softmax(torch.randn(4, 8, 300), -1)
    _run(x, "auto", 3, draft_probs=q)
    assert compiled_calls == []
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "auto")
    _run(x, None, 3)
    assert len(compiled_calls) == 1


def test_malformed_links_and_unsupported_inputs_take_the_torch_path(compiled_calls):
    x = _inputs(4, 8, 300, 8)
    nt, ns = x["tree"][2], x["tree"][3]
    nt[1, 2], ns[1, 5] = 4, 4  # two links into node 4 (unchecked): torch's scatter decides
    _assert_same(_run(x, None, 4), _run(x, "torch", 4))
    assert len(compiled_calls) == 1
    z = _inputs(4, 8, 300, 12, "chain", peak=30.0)  # a repeated retrieve_index on the path
    z["tree"] = (z["tree"][0], torch.zeros(4, 8, dtype=torch.int64), *z["tree"][2:])
    same = _run(z, None, 4)
    _assert_same(same, _run(z, "torch", 4))
    assert int(same.accept_token_num.max()) > 0 and len(compiled_calls) == 2
    y = _inputs(4, 8, 300, 9)
    for probs in (y["target_probs"].double(),
                  torch.softmax(torch.randn(4, 8, 600), -1)[:, :, ::2]):
        _assert_same(_run(dict(y, target_probs=probs), None, 4),
                     _run(dict(y, target_probs=probs), "torch", 4))
    assert len(compiled_calls) == 2


def test_the_compiled_passes_are_the_ones_imported():
    assert numba_impl.available() and numba_impl._kernels() is numba_kernels


def test_inputs_are_validated_before_anything_runs(compiled_calls):
    x = _inputs(4, 8, 300, 10)
    x["tree"][0][0, 3] = 300
    with pytest.raises(KernelInputError, match="SR903"):
        _run(x, None, 3, check_values=True)
    with pytest.raises(KernelInputError):
        _run(dict(x, target_probs=x["target_probs"][:, :5]), None, 3)
    assert compiled_calls == []


def test_inputs_that_require_grad_are_read_detached(compiled_calls):
    """(The torch path's out= gathers refuse such rows: it is given them detached.)"""
    x = _inputs(4, 8, 300, 11)
    grad = dict(x, target_probs=x["target_probs"].clone().requires_grad_())
    _assert_same(_run(grad, None, 3), _run(x, "torch", 3))
    assert len(compiled_calls) == 1


_WITHOUT_NUMBA = """
import json, sys
sys.modules["numba"] = None  # `import numba` raises ImportError
import torch
from specreg.kernels.tree_verify_sampling import verify_tree_sampling
from specreg.kernels.tree_verify_sampling.numba_impl import available
gen = torch.Generator().manual_seed(5)
p = torch.softmax(torch.randn(6, 7, 300, generator=gen) * 4, -1)
c = torch.randint(0, 300, (6, 7), generator=gen)
nt = torch.tensor([[1, 3, -1, -1, 6, -1, -1]] * 6)
ns = torch.tensor([[-1, 2, 4, 5, -1, -1, -1]] * 6)
out = verify_tree_sampling(c, torch.arange(42).view(6, 7), nt, ns, p, depth=3,
                           keys=torch.arange(6), check_values=False)
print(json.dumps([available(), "numba" in sys.modules and sys.modules["numba"] is not None,
                  out.predicts.tolist(), out.bonus.tolist()]))
"""


def test_without_numba_the_torch_path_runs():
    done = subprocess.run([sys.executable, "-c", _WITHOUT_NUMBA], capture_output=True,
                          text=True, cwd=ROOT, check=True)
    available, imported, predicts, bonus = json.loads(done.stdout.strip().splitlines()[-1])
    assert available is False and imported is False
    gen = torch.Generator().manual_seed(5)
    p = torch.softmax(torch.randn(6, 7, 300, generator=gen) * 4, -1)
    c = torch.randint(0, 300, (6, 7), generator=gen)
    nt = torch.tensor([[1, 3, -1, -1, 6, -1, -1]] * 6)
    ns = torch.tensor([[-1, 2, 4, 5, -1, -1, -1]] * 6)
    expected = verify_tree_sampling(c, torch.arange(42).view(6, 7), nt, ns, p, depth=3,
                                    keys=torch.arange(6), check_values=False)
    assert predicts == expected.predicts.tolist() and bonus == expected.bonus.tolist()
