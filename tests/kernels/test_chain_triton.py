"""Triton chain kernels (through Triton's interpreter) equal the torch implementations."""

import os
import subprocess
import sys
import textwrap

import pytest
import torch

from specreg.kernels.chain import verify_chain_greedy, verify_chain_sampling
from specreg.kernels.sampling import uniform_coins


def _same(a, b):
    assert torch.equal(a.accept_len, b.accept_len)
    assert torch.equal(a.bonus, b.bonus)
    assert torch.equal(a.output_tokens, b.output_tokens)
    assert a.accept_len.dtype == b.accept_len.dtype == torch.int32
    assert a.output_tokens.dtype == b.output_tokens.dtype == torch.int64


def _greedy_case(seed, b, n, vocab, dtype):
    gen = torch.Generator().manual_seed(seed)
    logits = torch.randn(b, n, vocab, generator=gen).to(dtype)
    predict = logits.float().argmax(-1)
    candidates = torch.cat([torch.randint(0, vocab, (b, 1), generator=gen), predict[:, :-1]], 1)
    for r in range(b):  # break the chain at a different place per request
        if r < n - 1:
            candidates[r, r + 1] = (candidates[r, r + 1] + 1) % vocab
    return candidates, logits


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16, torch.float16])
def test_greedy_triton_equals_torch(dtype):
    candidates, logits = _greedy_case(1, 4, 5, 300, dtype)  # 300 is not a multiple of 128
    for lens in (None, torch.tensor([5, 1, 3, 2], dtype=torch.int32)):
        torch_result = verify_chain_greedy(candidates, logits, verify_lens=lens, backend="torch")
        triton_result = verify_chain_greedy(
            candidates, logits, verify_lens=lens, backend="triton", block_v=128
        )
        _same(torch_result, triton_result)
    assert set(torch_result.accept_len.tolist()) != {0}


def test_greedy_triton_ties_and_masked_rows():
    logits = torch.full((2, 2, 40), float("-inf"))
    logits[0, 0, [7, 20, 39]] = 1.0  # tie across tiles of 16: lowest index wins
    candidates = torch.tensor([[0, 7], [0, 3]], dtype=torch.int32)
    torch_result = verify_chain_greedy(candidates, logits, backend="torch")
    triton_result = verify_chain_greedy(candidates, logits, backend="triton", block_v=16)
    _same(torch_result, triton_result)
    assert triton_result.output_tokens.tolist() == [[7, 0], [0, -1]]


def _sampling_case(seed, b, n, vocab, dtype):
    gen = torch.Generator().manual_seed(seed)
    p = torch.softmax(2 * torch.randn(b, n, vocab, generator=gen), -1)
    q = torch.softmax(2 * torch.randn(b, n - 1, vocab, generator=gen), -1)
    q[..., :8] += 0.5  # drafts from a few tokens so acceptance happens
    q = q / q.sum(-1, keepdim=True)
    p[..., :8] += 0.3 * q[..., :1, :8]
    p = p / p.sum(-1, keepdim=True)
    candidates = torch.randint(0, 8, (b, n), generator=gen)
    return candidates, p.to(dtype), q.to(dtype)


@pytest.mark.parametrize("dtype", [torch.float32, torch.bfloat16])
@pytest.mark.parametrize("target_only", [False, True])
def test_sampling_triton_equals_torch(dtype, target_only):
    b, n, vocab = 4, 5, 300
    accept_lens = set()
    for seed in range(3):
        candidates, p, q = _sampling_case(seed, b, n, vocab, dtype)
        coins = uniform_coins((b, n - 1), device="cpu", seed=seed, offsets=torch.arange(b))
        coins[0, :2] = 0.0  # force some acceptance
        stream = dict(keys=torch.arange(b) - 2 + 1000 * seed, positions=torch.arange(b) * 11)
        for lens, given in ((None, coins), (torch.tensor([5, 2, 1, 4]), coins), (None, None)):
            draft = None if target_only else q
            a = verify_chain_sampling(candidates, p, draft, verify_lens=lens, backend="torch",
                                      coins=given, **stream)
            t = verify_chain_sampling(candidates, p, draft, verify_lens=lens, backend="triton",
                                      block_v=128, coins=given, **stream)
            _same(a, t)
            accept_lens |= set(a.accept_len.tolist())
    assert len(accept_lens) >= 2


def test_sampling_triton_rejection_at_p_zero_and_no_drafts():
    # request 0 drafts token 5 with p(5) = 0: rejected, residual max(p - q, 0) is one-hot at 3;
    # request 1 drafts token 3 with p(3) = 1: accepted, bonus from p of row 1
    p = torch.zeros(2, 2, 20)
    p[:, :, 3] = 1.0
    q = torch.zeros(2, 1, 20)
    q[:, 0, 3] = 0.5
    q[:, 0, 5] = 0.5
    candidates = torch.tensor([[0, 5], [0, 3]])
    coins = torch.tensor([[0.2], [0.2]])
    keys = torch.tensor([7, 7])
    a = verify_chain_sampling(candidates, p, q, coins=coins, keys=keys, backend="torch")
    t = verify_chain_sampling(candidates, p, q, coins=coins, keys=keys, backend="triton",
                              block_v=16)
    _same(a, t)
    assert a.output_tokens.tolist() == [[3, -1], [3, 3]]
    one = verify_chain_sampling(candidates[:, :1], p[:, :1], q[:, :0], coins=coins[:, :0],
                                keys=keys, backend="triton", block_v=16)
    assert one.output_tokens.tolist() == [[3], [3]]


def test_sampling_triton_non_contiguous_inputs():
    b, n, vocab = 3, 4, 100
    candidates, p, q = _sampling_case(5, b, n, vocab, torch.float32)
    # transposed storage: vocab stride != 1, request stride != n * V
    p_strided = p.permute(2, 0, 1).contiguous().permute(1, 2, 0)
    q_strided = q.transpose(0, 1).contiguous().transpose(0, 1)
    cand_strided = candidates.t().contiguous().t()
    coins = uniform_coins((n, b), device="cpu", seed=9).t()  # non-contiguous coins
    assert not p_strided.is_contiguous() and not coins.is_contiguous()
    kwargs = dict(coins=coins[:, : n - 1], keys=torch.arange(b) * 2, positions=torch.arange(b) + 1)
    a = verify_chain_sampling(candidates, p, q, backend="torch", **kwargs)
    t = verify_chain_sampling(cand_strided, p_strided, q_strided, backend="triton", block_v=32,
                              **kwargs)
    _same(a, t)
    g = verify_chain_greedy(cand_strided, p_strided, backend="triton", block_v=32)
    _same(verify_chain_greedy(candidates, p, backend="torch"), g)


def test_sampling_triton_non_contiguous_keys_and_positions():
    """Keys and positions given as strided views (every other element of a larger tensor) key
    the same draws on Triton as on torch."""
    b, n, vocab = 3, 4, 100
    candidates, p, q = _sampling_case(5, b, n, vocab, torch.float32)
    keys = torch.arange(2 * b)[::2]
    positions = torch.arange(3 * b)[1::3]
    assert not keys.is_contiguous() and not positions.is_contiguous()
    for draft in (q, None):
        a = verify_chain_sampling(candidates, p, draft, keys=keys, positions=positions,
                                  backend="torch")
        t = verify_chain_sampling(candidates, p, draft, keys=keys, positions=positions,
                                  backend="triton", block_v=32)
        _same(a, t)


def test_sampling_triton_unchecked_out_of_range_token_is_never_accepted():
    """Token 25 >= V reaches the kernels unchecked: rejected without an out-of-bounds read; with
    p == q the residual has no mass, so both paths fall back to drawing from p."""
    candidates = torch.tensor([[0, 25, 1]])
    p = torch.full((1, 3, 20), 0.05)
    q = torch.full((1, 2, 20), 0.05)
    coins = torch.zeros(1, 2)
    keys = torch.tensor([53])
    t = verify_chain_sampling(candidates, p, q, coins=coins, keys=keys,
                              backend="triton", block_v=16, check_values=False)
    a = verify_chain_sampling(candidates, p, q, coins=coins, keys=keys,
                              backend="torch", check_values=False)
    _same(a, t)
    assert t.accept_len.tolist() == [0]


_LARGE_OFFSET_SCRIPT = textwrap.dedent(
    """
    import os
    os.environ["TRITON_INTERPRET"] = "1"
    import torch
    from specreg.kernels.chain import verify_chain_greedy, verify_chain_sampling
    b, n, vocab = 3, 3, 64
    stride_b = 2**30 + 1024  # fits int32, but 2 * stride_b does not
    storage = torch.empty(stride_b * (b - 1) + n * vocab, dtype=torch.bfloat16)  # 4 GiB, untouched
    logits = storage.as_strided((b, n, vocab), (stride_b, vocab, 1))
    gen = torch.Generator().manual_seed(0)
    for r in range(b):
        logits[r] = torch.randn(n, vocab, generator=gen).to(torch.bfloat16)
    predict = logits.float().argmax(-1)
    candidates = torch.cat([torch.zeros(b, 1, dtype=torch.long), predict[:, :-1]], 1)
    ref = verify_chain_greedy(candidates, logits, backend="torch")
    got = verify_chain_greedy(candidates, logits, backend="triton", block_v=16)
    assert torch.equal(ref.output_tokens, got.output_tokens), (ref, got)
    assert ref.accept_len.tolist() == [2, 2, 2]
    probs = storage.as_strided((b, n, vocab), (stride_b, vocab, 1))
    for r in range(b):
        probs[r] = torch.softmax(torch.randn(n, vocab, generator=gen), -1).to(torch.bfloat16)
    coins = torch.rand(b, n, generator=gen)
    kw = dict(coins=coins[:, :2], keys=torch.tensor([1, -2, 3]), positions=torch.tensor([0, 5, 9]))
    ref = verify_chain_sampling(candidates, probs, None, backend="torch", **kw)
    got = verify_chain_sampling(candidates, probs, None, backend="triton", block_v=16, **kw)
    assert torch.equal(ref.output_tokens, got.output_tokens), (ref, got)
    print("ok")
    """
)


def test_triton_row_offsets_past_int32():
    """A request whose rows start past element 2**31 (a 4 GiB virtual buffer, only a few KiB
    touched) is read correctly; 32-bit row offsets would wrap and read elsewhere or crash, so
    the check runs in a subprocess."""
    done = subprocess.run(
        [sys.executable, "-c", _LARGE_OFFSET_SCRIPT],
        capture_output=True, text=True, timeout=120, env={**os.environ, "TRITON_INTERPRET": "1"},
    )
    assert done.returncode == 0 and done.stdout.strip() == "ok", done.stderr[-2000:]


_COMPILE_SCRIPT = textwrap.dedent(
    """
    import os
    os.environ.pop("TRITON_INTERPRET", None)
    import triton
    from triton.backends.compiler import GPUTarget
    from triton.compiler import ASTSource
    from specreg.kernels.chain import triton_impl as chain

    target = GPUTarget("cuda", 90, 32)
    greedy = {"cand_ptr": "*i64", "stride_cb": "i32", "stride_cn": "constexpr",
              "logits_ptr": "*bf16", "stride_lb": "i64", "stride_ln": "i32", "stride_lv": "i32",
              "vlens_ptr": "*i32", "accept_ptr": "*i32", "bonus_ptr": "*i64", "out_ptr": "*i64",
              "n": "i32", "vocab": "i32", "HAS_VLENS": "constexpr", "BLOCK_V": "constexpr",
              "BLOCK_N": "constexpr"}
    for has_vlens in (False, True):
        triton.compile(ASTSource(chain._chain_greedy_kernel, greedy, constexprs={
            "stride_cn": 1, "HAS_VLENS": has_vlens, "BLOCK_V": 2048, "BLOCK_N": 8}),
            target=target)
    sampling = {"cand_ptr": "*i32", "stride_cb": "i32", "stride_cn": "i32",
                "p_ptr": "*fp32", "stride_pb": "i64", "stride_pn": "i32", "stride_pv": "constexpr",
                "q_ptr": "*bf16", "stride_qb": "i64", "stride_qn": "i32", "stride_qv": "i32",
                "coins_ptr": "*fp32", "stride_ub": "i32", "stride_un": "constexpr",
                "keys_ptr": "*i64", "positions_ptr": "*i64", "vlens_ptr": "*i64",
                "accept_ptr": "*i32", "bonus_ptr": "*i64", "out_ptr": "*i64",
                "n": "i32", "vocab": "i32", "HAS_Q": "constexpr", "HAS_VLENS": "constexpr",
                "BLOCK_V": "constexpr", "BLOCK_N": "constexpr"}
    for has_q in (False, True):
        for has_vlens in (False, True):
            triton.compile(ASTSource(chain._chain_sampling_kernel, sampling, constexprs={
                "stride_pv": 1, "stride_un": 1, "HAS_Q": has_q, "HAS_VLENS": has_vlens,
                "BLOCK_V": 2048, "BLOCK_N": 8}), target=target)
    print("ok")
    """
)


def test_triton_kernels_compile_for_sm90():
    """The kernels lower to PTX for an H100/H200-class target (no GPU needed): catches typing
    errors the interpreter accepts (loop-carried types, int64 promotions, constexpr branches)."""
    env = {k: v for k, v in os.environ.items() if k != "TRITON_INTERPRET"}
    done = subprocess.run(
        [sys.executable, "-c", _COMPILE_SCRIPT], capture_output=True, text=True, timeout=300,
        env=env,
    )
    assert done.returncode == 0 and done.stdout.strip().endswith("ok"), done.stderr[-3000:]
