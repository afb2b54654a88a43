"""ngram_match's compiled CPU path (numba_impl): the same chain proposals as the torch path and
the plain reference, chosen on CPU when numba imports, torch when asked for or when numba is
absent, and the inputs checked before either runs."""

from __future__ import annotations

import os
import random
import subprocess
import sys
from pathlib import Path

import pytest
import torch
from specreg_lookup.drafter import NgramDrafter
from specreg_lookup.kernels.ngram_match import chain_proposals, numba_impl, torch_impl
from specreg_lookup.kernels.ngram_match.reference import propose_row
from specreg_lookup.sizes import NgramOptions

from specreg.errors import KernelInputError

ROOT = Path(__file__).resolve().parents[2]
needs_numba = pytest.mark.skipif(numba_impl.kernel() is None, reason="numba is not installed")


def _fields(p) -> list[list[int]]:
    return [p.tokens.tolist(), p.num_drafts.tolist(), p.start.tolist(), p.ngram_len.tolist()]


def _batch(rng: random.Random, dtype: torch.dtype) -> tuple[torch.Tensor, torch.Tensor, list]:
    """A padded batch: rows of 1 to ~60 tokens over a small or large vocabulary (small ones
    repeat tokens, so long and tied matches are common), stale padding after each row."""
    vocab = rng.choice([1, 2, 3, 5, 50, 2**31 - 1 if dtype == torch.int32 else 2**40])
    rows = [[rng.randrange(vocab) for _ in range(rng.choice([1, 1, 2, 3, rng.randint(4, 60)]))]
            for _ in range(rng.randint(1, 7))]
    width = max(map(len, rows)) + rng.randint(0, 4)
    width = max(width, 2)
    tokens = torch.tensor([r + [rng.randrange(vocab) for _ in range(width - len(r))]
                           for r in rows], dtype=dtype)
    return tokens, torch.tensor([len(r) for r in rows], dtype=dtype), rows


@needs_numba
@pytest.mark.parametrize("dtype", [torch.int32, torch.int64])
def test_numba_equals_torch_and_the_reference_on_seeded_histories(dtype):
    rng = random.Random(33 if dtype == torch.int32 else 64)
    drafted = 0
    for _ in range(400):
        tokens, lengths, rows = _batch(rng, dtype)
        low = rng.randint(1, 4)
        high = rng.randint(low, 6)
        k = rng.randint(0, 7)
        args = dict(min_ngram=low, max_ngram=high, k=k)
        got = numba_impl.chain_proposals(tokens, lengths.long(), low, high, k)
        want = torch_impl.chain_proposals(tokens.long(), lengths.long(), low, high, k)
        assert _fields(got) == _fields(want), (rows, args)
        assert got.as_lists() == [propose_row(r, low, high, k) for r in rows], (rows, args)
        assert _fields(chain_proposals(tokens, lengths, **args)) == _fields(want)
        assert got.tokens.dtype == torch.int64 and got.tokens.shape == (len(rows), k)
        drafted += sum(n > 0 for n in got.num_drafts.tolist())
    assert drafted > 150  # the batches do match, often


@needs_numba
def test_numba_on_long_rows_equals_torch():
    """Word-like rows thousands of tokens long, as vLLM's runner hands them over."""
    gen = torch.Generator().manual_seed(0)
    tokens = torch.randint(0, 300, (16, 3000), generator=gen, dtype=torch.int32)
    tokens[:, 2000:2040] = tokens[:, 100:140]  # a long repeat to find
    lengths = torch.randint(1, 3001, (16,), generator=gen)
    for low, high, k in [(1, 4, 4), (2, 2, 8), (3, 5, 1), (1, 1, 3)]:
        got = chain_proposals(tokens, lengths, min_ngram=low, max_ngram=high, k=k, backend="auto")
        want = chain_proposals(tokens, lengths, min_ngram=low, max_ngram=high, k=k,
                               backend="torch")
        assert _fields(got) == _fields(want)


@needs_numba
def test_unchecked_length_zero_is_clamped_alike():
    """With value checks off a length of 0 is read as 1 (check_history's clamp) on both paths."""
    tokens = torch.tensor([[4, 4, 4], [1, 2, 1]])
    lengths = torch.tensor([0, 3])
    got, want = (chain_proposals(tokens, lengths, min_ngram=1, max_ngram=2, k=2,
                                 check_values=False, backend=b) for b in ("auto", "torch"))
    assert _fields(got) == _fields(want)


@pytest.mark.parametrize("bad", [
    dict(lengths=torch.tensor([0, 3])),  # a row of length 0
    dict(lengths=torch.tensor([4, 3])),  # longer than the rows
    dict(tokens=torch.tensor([[1.0, 2.0, 1.0], [1.0, 1.0, 1.0]])),
    dict(lengths=torch.tensor([3])),
])
def test_bad_inputs_are_refused_before_any_kernel_runs(monkeypatch, bad):
    def launched(*args, **kwargs):
        raise AssertionError("a kernel ran on unchecked inputs")

    monkeypatch.setattr(numba_impl, "chain_proposals", launched)
    monkeypatch.setattr(torch_impl, "chain_proposals", launched)
    inputs = dict(tokens=torch.tensor([[1, 2, 1], [1, 1, 1]]), lengths=torch.tensor([3, 3]))
    inputs.update(bad)
    with pytest.raises(KernelInputError):
        chain_proposals(inputs["tokens"], inputs["lengths"], min_ngram=1, max_ngram=2, k=2)


def _torch_only(monkeypatch) -> list[str]:
    """Records which path ran; the compiled one is replaced by a marker."""
    ran: list[str] = []
    real = torch_impl.chain_proposals
    monkeypatch.setattr(numba_impl, "chain_proposals",
                        lambda *a: ran.append("numba") or real(a[0].long(), *a[1:]))
    monkeypatch.setattr(torch_impl, "chain_proposals", lambda *a: ran.append("torch") or real(*a))
    return ran


def test_torch_is_chosen_explicitly(monkeypatch):
    ran = _torch_only(monkeypatch)
    tokens, lengths = torch.tensor([[1, 2, 3, 1, 2]]), torch.tensor([5])
    want = [[3, 1]]
    assert chain_proposals(tokens, lengths, min_ngram=1, max_ngram=3, k=2,
                           backend="torch").as_lists() == want
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "torch")
    assert chain_proposals(tokens, lengths, min_ngram=1, max_ngram=3, k=2).as_lists() == want
    drafter = NgramDrafter(NgramOptions(min_ngram=1, max_ngram=3), num_steps=2, backend="torch")
    monkeypatch.delenv("SPECREG_KERNEL_BACKEND")
    assert drafter.propose_lists(tokens, lengths) == want
    assert ran == ["torch"] * 3
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "triton")  # no Triton path here: torch
    assert chain_proposals(tokens, lengths, min_ngram=1, max_ngram=3, k=2).as_lists() == want
    assert ran == ["torch"] * 4
    with pytest.raises(KernelInputError, match="SR116"):
        chain_proposals(tokens, lengths, min_ngram=1, max_ngram=3, k=2, backend="numba")


@needs_numba
def test_auto_runs_the_compiled_path_where_it_applies(monkeypatch):
    ran = _torch_only(monkeypatch)
    monkeypatch.delenv("SPECREG_KERNEL_BACKEND", raising=False)
    tokens, lengths = torch.tensor([[1, 2, 3, 1, 2]]), torch.tensor([5])
    assert NgramDrafter(NgramOptions(min_ngram=1, max_ngram=3), num_steps=2).propose_lists(
        tokens, lengths) == [[3, 1]]
    chain_proposals(tokens, lengths, min_ngram=0, max_ngram=3, k=2)  # every position: torch
    chain_proposals(tokens[:, :1], torch.tensor([1]), min_ngram=1, max_ngram=3, k=2)  # W 1
    assert ran == ["numba", "torch", "torch"]


def test_without_numba_the_torch_path_runs(monkeypatch):
    """numba blocked in sys.modules: `kernel()` is None and the proposals are torch's."""
    monkeypatch.setitem(sys.modules, "numba", None)
    monkeypatch.setattr(numba_impl, "_KERNEL", [])
    assert numba_impl.kernel() is None
    ran = _torch_only(monkeypatch)
    tokens, lengths = torch.tensor([[1, 2, 3, 9, 1, 2, 4, 5, 1, 2]]), torch.tensor([10])
    got = chain_proposals(tokens, lengths, min_ngram=1, max_ngram=3, k=2, backend="auto")
    assert got.as_lists() == [[3, 9]] and ran == ["torch"]


BLOCKED = """
import sys
class Block:
    def find_spec(self, name, path=None, target=None):
        if name == "numba" or name.startswith("numba."):
            raise ImportError("numba is blocked")
sys.meta_path.insert(0, Block())
import torch
from specreg_lookup.drafter import NgramDrafter
from specreg_lookup.kernels.ngram_match import numba_impl
from specreg_lookup.sizes import NgramOptions
drafter = NgramDrafter(NgramOptions(min_ngram=1, max_ngram=3), num_steps=2)
print(drafter.propose_lists(torch.tensor([[1, 2, 3, 1, 2]]), torch.tensor([5])),
      numba_impl.kernel(), "numba" in sys.modules)
"""


def test_a_fresh_process_without_numba_drafts_with_torch():
    env = {**os.environ, "PYTHONPATH": os.pathsep.join([str(ROOT), str(ROOT / "plugins")])}
    env.pop("SPECREG_KERNEL_BACKEND", None)
    done = subprocess.run([sys.executable, "-c", BLOCKED], capture_output=True, text=True,
                          env=env, cwd=ROOT, timeout=120)
    assert done.returncode == 0, done.stderr
    assert done.stdout.split() == ["[[3,", "1]]", "None", "False"]
