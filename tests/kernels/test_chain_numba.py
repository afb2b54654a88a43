"""Chain sampling's compiled CPU path (`numba_impl`, `numba_kernels`): the torch path's tokens and
accept counts bit for bit, and the reference's, on many keys, small and production vocabularies,
float32 and bfloat16 rows, with q and target-only, ragged verify lengths, invalid draft ids,
residuals without mass and rows holding NaN or inf (values unchecked); the dispatch (taken on
CPU when the backend is automatic, never with `backend='torch'` or SPECREG_KERNEL_BACKEND=torch;
with the CPU-default read checks in the compiled pass, a flagged request handing the call to
the torch path for its exact checks and errors); and the clean fallback to the torch path
without numba (a subprocess where `import numba` fails)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import torch

import specreg.kernels.chain as chain
from specreg.errors import KernelInputError
from specreg.kernels.chain import verify_chain_sampling
from specreg.kernels.chain.reference import verify_chain_sampling_reference
from specreg.kernels.chain.types import ChainSamplingInputs

pytest.importorskip("numba")

ROOT = Path(__file__).resolve().parents[2]


def _inputs(b, n, vocab, seed, dtype=torch.float32, with_q=True, q_dtype=None, agree=0.7):
    """Peaked p and q rows, drafts that are p's argmax with probability `agree` (chains partly
    accepted), 64-bit keys, positions and ragged verify lengths."""
    gen = torch.Generator().manual_seed(seed)
    p = torch.rand(b, n, vocab, generator=gen).pow_(8)
    p /= p.sum(-1, keepdim=True)
    q = torch.rand(b, n - 1, vocab, generator=gen).pow_(8)
    q /= q.sum(-1, keepdim=True)
    candidates = torch.randint(0, vocab, (b, n), generator=gen)
    if n > 1:
        hit = torch.rand(b, n - 1, generator=gen) < agree
        candidates[:, 1:] = torch.where(hit, p[:, :-1].argmax(-1), candidates[:, 1:])
    return dict(
        candidates=candidates,
        target_probs=p.to(dtype),
        draft_probs=q.to(q_dtype or dtype) if with_q else None,
        keys=torch.randint(-(2**63), 2**63 - 1, (b,), generator=gen),
        positions=torch.randint(0, 1 << 20, (b,), generator=gen),
        verify_lens=torch.randint(1, n + 1, (b,), generator=gen),
    )


def _run(x, backend, check_values=False, **extra):
    return verify_chain_sampling(x["candidates"], x["target_probs"], x["draft_probs"],
                                 keys=x["keys"], positions=x["positions"],
                                 verify_lens=x["verify_lens"], check_values=check_values,
                                 backend=backend, **extra)


def _assert_same(a, b):
    assert torch.equal(a.accept_len, b.accept_len)
    assert torch.equal(a.bonus, b.bonus)
    assert torch.equal(a.output_tokens, b.output_tokens)
    assert a.accept_len.dtype == b.accept_len.dtype and a.bonus.dtype == b.bonus.dtype


@pytest.fixture
def compiled_calls(monkeypatch):
    """The number of calls that took the compiled path."""
    calls = []
    real = chain.verify_chain_sampling_numba

    def spy(inputs):
        calls.append(inputs)
        return real(inputs)

    monkeypatch.setattr(chain, "verify_chain_sampling_numba", spy)
    return calls


def _compare(x, compiled_calls, reference=True):
    before = len(compiled_calls)
    compiled = _run(x, None)
    assert len(compiled_calls) == before + 1, "the compiled path was not taken"
    _assert_same(compiled, _run(x, "torch"))
    if reference:
        sampled = _run(x, "torch")
        inputs = ChainSamplingInputs(
            candidates=x["candidates"], target_probs=x["target_probs"],
            draft_probs=x["draft_probs"], coins=_coins(x), keys=x["keys"],
            positions=x["positions"], verify_lens=x["verify_lens"],
        )
        _assert_same(sampled, verify_chain_sampling_reference(inputs))
        _assert_same(compiled, verify_chain_sampling_reference(inputs))


def _coins(x):
    from specreg.kernels.random_stream import accept_coins_torch

    return accept_coins_torch(x["keys"], x["positions"], x["candidates"][:, 1:])


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_q", [True, False])
def test_small_vocabularies_equal_torch_and_the_reference(dtype, with_q, compiled_calls):
    """60 keyed batches per case over vocabularies inside one race block, at its edges and
    across several blocks with a partial last one; n = 1 (no drafts) included."""
    for seed in range(60):
        vocab = (1, 5, 127, 128, 129, 300, 1000)[seed % 7]
        n = 1 + seed % 6
        x = _inputs(6, n, vocab, seed, dtype, with_q)
        _compare(x, compiled_calls, reference=seed % 4 == 0)


@pytest.mark.parametrize("vocab", [32768, 151936])
@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
def test_production_vocabularies_equal_torch_and_the_reference(vocab, dtype, compiled_calls):
    for with_q in (True, False):
        for seed in range(3):
            x = _inputs(8, 5, vocab, 100 + seed, dtype, with_q)
            _compare(x, compiled_calls, reference=seed == 0)


def test_mixed_dtypes_explicit_coins_and_no_verify_lens(compiled_calls):
    """bfloat16 p with float32 q and the reverse; float64 coins given by the caller."""
    for seed, (dtype, q_dtype) in enumerate([(torch.bfloat16, torch.float32),
                                             (torch.float32, torch.bfloat16)] * 5):
        x = _inputs(16, 6, 4000, seed, dtype, True, q_dtype)
        x["verify_lens"] = None
        coins = torch.rand(16, 7, generator=torch.Generator().manual_seed(seed),
                           dtype=torch.float64)
        _assert_same(_run(x, None, coins=coins), _run(x, "torch", coins=coins))
    assert len(compiled_calls) == 10


def test_invalid_ids_empty_residuals_and_nonfinite_rows(compiled_calls):
    """Values unchecked (check_values=False): draft ids -1 and >= V, a q row equal to p (a
    residual without mass: the draw is from p), rows holding NaN, inf, zeros and -0.0: the
    same tokens as the torch path."""
    for seed in range(24):
        with_q = seed % 2 == 0
        x = _inputs(12, 5, 700, seed, torch.float32, with_q, agree=0.9)
        p, q, c = x["target_probs"], x["draft_probs"], x["candidates"]
        c[0, 1], c[1, 2], c[2, 1] = -1, 700, 2**40
        x["verify_lens"][3] = 5
        p[3, 0, c[3, 1]] = 0.0  # never accepted: request 3 rejects its first draft
        if with_q:
            q[3] = p[3, :4]  # and its residual p - q has no mass: the draw is from p
        p[4, :, 5] = float("nan")
        p[5, :, 200] = float("inf")
        p[6] = 0.0
        p[7, :, :300] = -0.0
        if with_q:
            q[8, :, 9] = float("nan")
            q[9, :, 10] = float("inf")
        _compare(x, compiled_calls, reference=False)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("with_q", [True, False])
def test_first_pass_has_the_torch_paths_bits(dtype, with_q):
    """Pass 1's intermediate values, which the tokens rarely see (a mass an ulp off changes the
    race only near a tie), equal the torch path's: the accept counts, the block masses of the
    weights each request draws from (bit for bit), the residual flag, the key lanes and the
    stream's words of the block keys."""
    from specreg.kernels.block_race import block_masses_torch
    from specreg.kernels.chain import emit_lanes
    from specreg.kernels.chain.numba_impl import first_pass
    from specreg.kernels.random_stream import token_words_torch
    from specreg.kernels.random_stream.types import BLOCK_KEY_BASE

    for seed in range(8):
        x = _inputs(10, 5, 1000 + 37 * seed, seed, dtype, with_q)
        if with_q:
            x["verify_lens"][0] = 5
            x["target_probs"][0, 0, x["candidates"][0, 1]] = 0.0  # rejected at row 0,
            x["draft_probs"][0] = x["target_probs"][0, :4]  # with a residual without mass
        torch_result = _run(x, "torch")
        inputs = ChainSamplingInputs(
            candidates=x["candidates"], target_probs=x["target_probs"],
            draft_probs=x["draft_probs"], coins=_coins(x), keys=x["keys"],
            positions=x["positions"], verify_lens=x["verify_lens"],
        )
        state = first_pass(inputs)
        accept = torch.from_numpy(state["accept"])
        assert torch.equal(accept, torch_result.accept_len.long())
        limit = (x["verify_lens"] - 1).clamp(0, 4)
        rejected = accept < limit
        assert torch.equal(torch.from_numpy(state["flags"][:, 0]).bool(), rejected)
        for r in range(10):
            p_row = x["target_probs"][r, accept[r]].float()
            weights = p_row
            if rejected[r]:
                if with_q:
                    weights = (p_row - x["draft_probs"][r, accept[r]].float()).clamp_min(0.0)
                else:
                    weights = p_row.clone()
                    weights[x["candidates"][r, accept[r] + 1]] = 0.0
                if block_masses_torch(weights[None]).amax() <= 0:
                    weights = p_row
            residual = bool(rejected[r]) and weights is not p_row
            assert bool(state["flags"][r, 1]) == residual
            masses = block_masses_torch(weights[None])[0]
            assert torch.equal(torch.from_numpy(state["masses"][r]).view(torch.int32),
                               masses.view(torch.int32)), (seed, r)
        if with_q:  # the planted empty residual
            assert state["flags"][0, 0] and not state["flags"][0, 1]
        lanes = emit_lanes(x["keys"], x["positions"], accept, rejected)
        assert torch.equal(torch.from_numpy(state["lanes"]), lanes)
        block_keys = BLOCK_KEY_BASE + torch.arange(state["words"].shape[1])
        words = token_words_torch((lanes[:, :1], lanes[:, 1:]), block_keys)
        assert torch.equal(torch.from_numpy(state["words"]), words)


def test_dispatch_keeps_the_torch_path_when_asked(compiled_calls, monkeypatch):
    x = _inputs(4, 4, 300, 0)
    _run(x, "torch")
    _run(x, "torch", check_values=None)
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "torch")
    _run(x, None)
    _run(x, None, check_values=None)
    assert compiled_calls == []
    monkeypatch.setenv("SPECREG_KERNEL_BACKEND", "auto")
    _run(x, None)
    _run(x, "auto", check_values=True)  # every value checked before the launch
    _run(x, None, check_values=None)  # the CPU-default read checks, in the compiled pass
    assert len(compiled_calls) == 3


def _outcome(x, backend):
    """The result, or the error message, of a call with the CPU-default read checks."""
    try:
        result = _run(x, backend, check_values=None)
    except KernelInputError as error:
        return str(error)
    return (result.accept_len.tolist(), result.output_tokens.tolist())


@pytest.mark.parametrize("with_q", [True, False])
def test_read_checks_give_the_torch_paths_errors_and_results(with_q, monkeypatch):
    """With the CPU-default read checks the compiled pass flags the requests whose values fail
    a quick test; a flag hands the call to the torch path (its exact checks raise, or pass).
    Planted bad values in what the rule reads (a verified drafted p(x) or q(x) before or
    after the stop, a row drawn from), q(x) = 0 (the q row is read whole), -0.0 and huge
    values (flagged, then valid), and bad values where the rule does not read (no error):
    the same error message or the same tokens as the torch path, and the compiled path's
    own result when nothing is flagged."""
    import specreg.kernels.chain.numba_impl as numba_impl

    handed = []
    real = numba_impl.verify_chain_sampling_torch
    monkeypatch.setattr(numba_impl, "verify_chain_sampling_torch",
                        lambda inputs: handed.append(1) or real(inputs))
    plants = [
        ("p_x", float("nan")), ("p_x", -1.0), ("p_x_late", float("inf")), ("row", float("nan")),
        ("row", -0.0), ("row", 1e38), ("row_zero", 0.0), ("unread", float("nan")),
        ("nothing", 0.0),
    ] + ([("q_x", -1.0), ("q_x_zero", 0.0), ("q_row", float("inf")), ("q_row_zero", 0.0)]
         if with_q else [])
    for seed, (where, value) in enumerate(plants):
        x = _inputs(6, 5, 400, seed, torch.float32, with_q, agree=0.9)
        x["verify_lens"][:] = 5
        plain = _run(x, "torch")
        rejected = (plain.accept_len < 4).nonzero().flatten().tolist()
        r = rejected[0] if where.startswith("q_row") and rejected else 2
        a = int(plain.accept_len[r])
        c, p, q = x["candidates"], x["target_probs"], x["draft_probs"]
        if where in ("p_x", "p_x_late"):
            i = 0 if where == "p_x" else 3
            p[r, i, c[r, i + 1]] = value
        elif where in ("q_x", "q_x_zero"):
            q[r, 0, c[r, 1]] = value
            if where == "q_x_zero":
                q[r, 0] = 0.0  # an all-zero q row: SR904
        elif where == "row":
            p[r, a, 7] = value
        elif where == "row_zero":
            p[r, a] = value  # a row without mass
        elif where in ("q_row", "q_row_zero") and a < 4:
            q[r, a, 9] = value
            if where == "q_row_zero":
                q[r, a] = 0.0
        elif where == "unread":
            p[r, 4 if a < 4 else 0, 11] = value
        before = len(handed)
        expected = _outcome(x, "torch")
        assert _outcome(x, None) == expected, where
        if where in ("nothing", "unread"):
            assert len(handed) == before, where  # nothing flagged: the compiled result


def test_unsupported_inputs_take_the_torch_path(compiled_calls):
    x = _inputs(4, 4, 300, 1)
    wide = x["target_probs"].double()
    _assert_same(_run(dict(x, target_probs=wide), None), _run(dict(x, target_probs=wide), "torch"))
    strided = torch.empty(4, 4, 600).uniform_()[:, :, ::2]
    _assert_same(_run(dict(x, target_probs=strided), None),
                 _run(dict(x, target_probs=strided), "torch"))
    empty = _inputs(0, 4, 300, 1)
    assert _run(empty, None).accept_len.shape == (0,)
    assert compiled_calls == []


def test_inputs_are_validated_before_the_launch(compiled_calls):
    x = _inputs(4, 4, 300, 2)
    x["candidates"][0, 1] = 300
    with pytest.raises(KernelInputError, match="SR903"):
        _run(x, None, check_values=True)
    with pytest.raises(KernelInputError):
        _run(dict(x, draft_probs=x["draft_probs"][:, :2]), None)
    assert compiled_calls == []


def test_inputs_that_require_grad_are_read_detached(compiled_calls):
    x = _inputs(4, 4, 300, 3)
    x = dict(x, target_probs=x["target_probs"].requires_grad_(),
             draft_probs=x["draft_probs"].requires_grad_())
    _assert_same(_run(x, None), _run(x, "torch"))
    assert len(compiled_calls) == 1


_WITHOUT_NUMBA = """
import json, sys
sys.modules["numba"] = None  # `import numba` raises ImportError
import torch
from specreg.kernels.chain import verify_chain_sampling
from specreg.kernels.chain.numba_impl import available
gen = torch.Generator().manual_seed(5)
p = torch.rand(8, 4, 300, generator=gen); p /= p.sum(-1, keepdim=True)
q = torch.rand(8, 3, 300, generator=gen); q /= q.sum(-1, keepdim=True)
c = torch.randint(0, 300, (8, 4), generator=gen)
out = verify_chain_sampling(c, p, q, keys=torch.arange(8), check_values=False)
print(json.dumps([available(), "numba" in sys.modules and sys.modules["numba"] is not None,
                  out.output_tokens.tolist()]))
"""


def test_without_numba_the_torch_path_runs():
    done = subprocess.run([sys.executable, "-c", _WITHOUT_NUMBA], capture_output=True,
                          text=True, cwd=ROOT, check=True)
    available, imported, tokens = json.loads(done.stdout.strip().splitlines()[-1])
    assert available is False and imported is False
    gen = torch.Generator().manual_seed(5)
    p = torch.rand(8, 4, 300, generator=gen)
    p /= p.sum(-1, keepdim=True)
    q = torch.rand(8, 3, 300, generator=gen)
    q /= q.sum(-1, keepdim=True)
    c = torch.randint(0, 300, (8, 4), generator=gen)
    expected = verify_chain_sampling(c, p, q, keys=torch.arange(8), check_values=False)
    assert tokens == expected.output_tokens.tolist()
