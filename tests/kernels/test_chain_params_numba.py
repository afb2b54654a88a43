"""The params chain's compiled CPU draw (`chain_params.numba_impl`, `numba_kernels`): the torch
path's tokens and accept counts bit for bit (and the reference's on small vocabularies), on
many keys, small and production vocabularies, float32 and bfloat16 logits, top-k, top-p, min-p,
temperature alone and per-request mixes with greedy requests, with q and target-only, the
drafter-invariant rule, ragged verify lengths, invalid draft ids and residuals without mass;
the dispatch (taken on CPU when the backend is automatic, never with `backend='torch'` or
SPECREG_KERNEL_BACKEND=torch, never for probability rows); and the clean fallback to the torch
path without numba (a subprocess where `import numba` fails)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import specreg.kernels.chain_params.torch_impl as torch_impl
from specreg.contract.sampling_params import SamplingParams
from specreg.errors import KernelInputError
from specreg.kernels.chain_params import prepare_chain_params, verify_chain_with_params
from specreg.kernels.chain_params.reference import verify_chain_with_params_reference

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[2]

#: Per-request filters: (temperature, top_k, top_p, min_p); "mixed" draws each request's own.
CASES = {
    "top_k": (0.7, 100, 1.0, 0.0),
    "top_p": (1.3, 0, 0.9, 0.0),
    "min_p": (0.8, 0, 1.0, 5e-3),
    "temperature": (1.1, 0, 1.0, 0.0),
    "all": (0.9, 200, 0.95, 1e-4),
}


def _params(b, vocab, case, gen):
    if case != "mixed":
        t, k, p, m = CASES[case]
        return SamplingParams.of(b, temperature=t, top_k=min(k, vocab), top_p=p, min_p=m)
    pick = lambda share: torch.rand(b, generator=gen) < share  # noqa: E731
    return SamplingParams.of(
        b,
        temperature=torch.where(pick(0.15), 0.0, 0.2 + 1.5 * torch.rand(b, generator=gen)),
        top_k=torch.where(pick(0.5), torch.randint(1, min(vocab, 300) + 1, (b,), generator=gen), 0),
        top_p=torch.where(pick(0.5), 0.5 + 0.5 * torch.rand(b, generator=gen), 1.0),
        min_p=torch.where(pick(0.4), 0.05 * torch.rand(b, generator=gen), 0.0),
    )


def _inputs(b, n, vocab, seed, case, dtype=torch.float32, with_q=True, agree=0.6):
    """Logit rows (a few peaked heads over Gaussian noise), drafts that are the target's argmax
    with probability `agree`, 64-bit keys, positions and ragged verify lengths."""
    gen = torch.Generator().manual_seed(seed)
    target = 2.0 * torch.randn(b, n, vocab, generator=gen)
    heads = torch.randint(0, vocab, (b, n, 4), generator=gen)
    target.scatter_add_(2, heads, 6.0 * torch.rand(b, n, 4, generator=gen))
    draft = target[:, :-1] + 0.7 * torch.randn(b, n - 1, vocab, generator=gen)
    candidates = torch.randint(0, vocab, (b, n), generator=gen)
    if n > 1:
        hit = torch.rand(b, n - 1, generator=gen) < agree
        candidates[:, 1:] = torch.where(hit, target[:, :-1].argmax(-1), candidates[:, 1:])
    return dict(
        candidates=candidates, target=target.to(dtype),
        draft=draft.to(dtype) if with_q else None, params=_params(b, vocab, case, gen),
        keys=torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
        positions=torch.randint(0, 1 << 20, (b,), generator=gen),
        verify_lens=torch.randint(1, n + 1, (b,), generator=gen),
    )


def _run(x, backend, check_values=False, **extra):
    return verify_chain_with_params(
        x["candidates"], x["target"], x["draft"], params=x["params"], keys=x["keys"], positions=x["positions"],
        verify_lens=x["verify_lens"], check_values=check_values, backend=backend, **extra,
    )


def _assert_same(a, b):
    assert torch.equal(a.accept_len, b.accept_len)
    assert torch.equal(a.bonus, b.bonus)
    assert torch.equal(a.output_tokens, b.output_tokens)
    assert torch.equal(a.param_error, b.param_error)


@pytest.fixture
def compiled_calls(monkeypatch):
    """The chunks drawn by the compiled path."""
    calls = []
    real = torch_impl.emit_chunk

    def spy(*args):
        calls.append(args)
        return real(*args)

    monkeypatch.setattr(torch_impl, "emit_chunk", spy)
    return calls


def _compare(x, compiled_calls, reference=False, **extra):
    before = len(compiled_calls)
    compiled = _run(x, None, **extra)
    assert len(compiled_calls) > before, "the compiled path was not taken"
    _assert_same(compiled, _run(x, "torch", **extra))
    if reference:
        inputs = prepare_chain_params(
            x["candidates"], x["target"].clone(),
            None if x["draft"] is None else x["draft"].clone(), params=x["params"],
            keys=x["keys"], positions=x["positions"], verify_lens=x["verify_lens"],
            check_values=False, **extra,
        )
        _assert_same(compiled, verify_chain_with_params_reference(inputs))


@pytest.mark.parametrize("case", [*CASES, "mixed"])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_q", [True, False])
def test_small_vocabularies_equal_torch_and_the_reference(case, dtype, with_q, compiled_calls):
    """12 keyed batches per case over vocabularies inside one race block, at its edges, across
    several blocks with a partial last one, and past the pivot search's minimum (4,096)."""
    for seed in range(12):
        vocab = (5, 127, 128, 129, 1000, 5000)[seed % 6]
        x = _inputs(8, 2 + seed % 4, vocab, seed, case, dtype, with_q)
        _compare(x, compiled_calls, reference=seed % 3 == 0)


@pytest.mark.parametrize("vocab", [32768, 151936])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_production_vocabularies_equal_torch(vocab, dtype, compiled_calls):
    for seed, case in enumerate(("top_k", "top_p", "min_p", "mixed")):
        for with_q in (True, False):
            x = _inputs(6, 3, vocab, 100 + seed, case, dtype, with_q)
            _compare(x, compiled_calls)


def test_invariant_rule_and_mixed_dtypes(compiled_calls):
    """The drafter-invariant rule (its draws target-only), a bfloat16 target with a float32
    draft and the reverse, no verify lengths."""
    for seed in range(6):
        x = _inputs(10, 4, 3000, 200 + seed, "mixed", with_q=True)
        x["verify_lens"] = None
        _compare(x, compiled_calls, invariant=True)
        x["target"] = x["target"].to(torch.bfloat16 if seed % 2 else torch.float32)
        x["draft"] = x["draft"].to(torch.float32 if seed % 2 else torch.bfloat16)
        _compare(x, compiled_calls)


def test_invalid_ids_empty_residuals_and_nonfinite_rows(compiled_calls):
    """Values unchecked: draft ids -1 and >= V, a q row equal to p (a residual without mass:
    the draw is from p), a draft the filter drops (rejected), rows holding NaN, +-inf and -0.0:
    the same tokens as the torch path. (Not under top-p: the torch path's binned top-p search
    refuses NaN scores, unchecked.)"""
    for seed in range(18):
        with_q = seed % 2 == 0
        case = ("top_k", "min_p", "temperature")[seed % 6 // 2]
        x = _inputs(12, 4, 700, 300 + seed, case, with_q=with_q, agree=0.9)
        t, d, c = x["target"], x["draft"], x["candidates"]
        x["verify_lens"][:6] = 4
        c[0, 1], c[1, 2], c[2, 1] = -1, 700, 2**40
        t[3, 0, c[3, 1]] = -1e4  # filtered out: rejected
        if with_q:
            d[3] = t[3, :3]  # and p - q has no mass: the draw is from p
        t[4, :, 5] = float("nan")
        t[5, :, 200] = float("inf")
        t[6, :, :350] = float("-inf")
        t[7, :, :300] = -0.0
        if with_q:
            d[8, :, 9] = float("nan")
            d[9, :, 10:20] = float("-inf")
        _compare(x, compiled_calls)


def test_dispatch_keeps_the_torch_path_when_asked(compiled_calls, monkeypatch):
    x = _inputs(4, 3, 300, 0, "all")
    _run(x, "torch")
    _run(x, "torch", check_values=None)
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "torch")
    _run(x, None)
    assert compiled_calls == []
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "auto")
    _assert_same(_run(x, None, check_values=None), _run(x, "torch", check_values=None))
    _assert_same(_run(x, "auto", check_values=True), _run(x, "torch", check_values=True))
    assert len(compiled_calls) >= 2


def test_unsupported_inputs_take_the_torch_path(compiled_calls):
    """Probability rows (their keys need a log), float16 and strided logits."""
    x = _inputs(4, 3, 300, 1, "all")
    probs = dict(x, target=x["target"].softmax(-1), draft=x["draft"].softmax(-1))
    _assert_same(_run(probs, None, probabilities=True), _run(probs, "torch", probabilities=True))
    wide = dict(x, target=x["target"].half(), draft=x["draft"].half())
    _assert_same(_run(wide, None), _run(wide, "torch"))
    strided = torch.randn(4, 3, 600)[:, :, ::2]
    _assert_same(_run(dict(x, target=strided), None), _run(dict(x, target=strided), "torch"))
    assert compiled_calls == []


def test_inputs_are_validated_before_the_draw(compiled_calls):
    x = _inputs(4, 3, 300, 2, "all")
    x["candidates"][0, 1] = 300
    with pytest.raises(KernelInputError, match="SR903"):
        _run(x, None, check_values=True)
    x = _inputs(4, 3, 300, 2, "top_k")  # (under top-p, the torch path's binned search
    x["target"][1, :, 3] = float("nan")  # fails on a NaN row before its read check)
    with pytest.raises(KernelInputError, match="SR904"):
        _run(x, None, check_values=None)
    bad = dict(x, params=SamplingParams.of(4, temperature=0.5, top_p=1.5))
    with pytest.raises(KernelInputError):
        _run(bad, None, check_values=None)
    assert compiled_calls == []


_WITHOUT_NUMBA = """
import json, sys
sys.modules["numba"] = None  # `import numba` raises ImportError
import torch
from specreg.contract.sampling_params import SamplingParams
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.chain_params.numba_impl import available
gen = torch.Generator().manual_seed(5)
t = torch.randn(8, 3, 300, generator=gen); d = torch.randn(8, 2, 300, generator=gen)
c = torch.randint(0, 300, (8, 3), generator=gen)
params = SamplingParams.of(8, temperature=0.9, top_k=50, top_p=0.9, min_p=0.01)
out = verify_chain_with_params(c, t, d, params=params, keys=torch.arange(8), check_values=False)
print(json.dumps([available(), "numba" in sys.modules and sys.modules["numba"] is not None,
                  out.output_tokens.tolist()]))
"""


def test_without_numba_the_torch_path_runs():
    done = subprocess.run([sys.executable, "-c", _WITHOUT_NUMBA], capture_output=True,
                          text=True, cwd=ROOT, check=True)
    available, imported, tokens = json.loads(done.stdout.strip().splitlines()[-1])
    assert available is False and imported is False
    gen = torch.Generator().manual_seed(5)
    t, d = torch.randn(8, 3, 300, generator=gen), torch.randn(8, 2, 300, generator=gen)
    c = torch.randint(0, 300, (8, 3), generator=gen)
    params = SamplingParams.of(8, temperature=0.9, top_k=50, top_p=0.9, min_p=0.01)
    expected = verify_chain_with_params(c, t, d, params=params, keys=torch.arange(8),
                                        check_values=False, backend="torch")
    assert tokens == expected.output_tokens.tolist()
