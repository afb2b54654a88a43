"""Every class of invalid input to the chain verifiers raises its catalog code before launch."""

import pytest
import torch

from specreg.step.chain_verifier import ChainVerifier
from specreg.errors import KernelInputError
from specreg.kernels.chain import (
    verify_chain_greedy,
    verify_chain_greedy_from_predict,
    verify_chain_sampling,
)
from specreg.kernels.chain_params import verify_chain_with_params
from specreg.kernels.relaxed import RuleParams, verify_chain_relaxed
from specreg.kernels.relaxed.types import THRESHOLDS
from specreg.contract.sampling_params import SamplingParams

B, N, V = 2, 3, 5


def _inputs():
    candidates = torch.tensor([[0, 1, 2], [3, 4, 0]])
    p = torch.full((B, N, V), 1.0 / V)
    q = torch.full((B, N - 1, V), 1.0 / V)
    return candidates, p, q


def _code(fn, *args, **kwargs) -> str:
    with pytest.raises(KernelInputError) as err:
        fn(*args, **kwargs)
    return err.value.code


def test_shape_errors():
    c, p, q = _inputs()
    assert _code(verify_chain_greedy, c[0], p) == "SR900"
    assert _code(verify_chain_greedy, c, p[:, :2]) == "SR900"
    assert _code(verify_chain_greedy, c[:, :0], p[:, :0]) == "SR900"
    assert _code(verify_chain_sampling, c, p, q[:, :1]) == "SR900"
    assert _code(verify_chain_sampling, c, p, q[..., :4]) == "SR900"
    assert _code(verify_chain_sampling, c, p, q, coins=torch.zeros(B, 1)) == "SR900"
    assert _code(verify_chain_sampling, c, p, q, keys=torch.zeros(B, 1, dtype=torch.long)) == "SR900"
    assert _code(verify_chain_sampling, c, p, q, keys=torch.zeros(B + 1, dtype=torch.long)) == "SR900"
    assert _code(verify_chain_sampling, c, p, q, positions=torch.zeros(B, 1, dtype=torch.long)) == "SR900"
    assert _code(verify_chain_sampling, c, p, q, positions=torch.zeros((), dtype=torch.long)) == "SR900"
    assert _code(verify_chain_sampling, c, p, q, verify_lens=torch.ones(3, dtype=torch.long)) == "SR900"
    assert _code(verify_chain_greedy_from_predict, c, c[:, :2]) == "SR900"
    assert _code(ChainVerifier(num_draft_tokens=4).verify_greedy, c, p) == "SR900"


def test_dtype_errors():
    c, p, q = _inputs()
    assert _code(verify_chain_greedy, c.float(), p) == "SR901"
    assert _code(verify_chain_greedy, c, p.long()) == "SR901"
    assert _code(verify_chain_sampling, c, p, q.to(torch.int32)) == "SR901"
    assert _code(verify_chain_sampling, c, p, q, verify_lens=torch.ones(B)) == "SR901"
    assert _code(verify_chain_sampling, c, p, q, coins=torch.zeros(B, 2, dtype=torch.long)) == "SR901"
    assert _code(verify_chain_sampling, c, p, q, keys=torch.zeros(B)) == "SR901"
    assert _code(verify_chain_sampling, c, p, q, positions=torch.zeros(B)) == "SR901"
    assert _code(verify_chain_greedy, c.tolist(), p) == "SR901"


def test_device_errors():
    c, p, q = _inputs()
    assert _code(verify_chain_greedy, c, p.to("meta")) == "SR902"
    assert _code(verify_chain_sampling, c, p, q.to("meta")) == "SR902"
    assert _code(verify_chain_sampling, c, p, q, coins=torch.zeros(B, 2, device="meta")) == "SR902"
    meta = torch.zeros(B, dtype=torch.long, device="meta")
    assert _code(verify_chain_sampling, c, p, q, keys=meta) == "SR902"
    assert _code(verify_chain_sampling, c, p, q, positions=meta) == "SR902"


def test_token_out_of_range():
    c, p, q = _inputs()
    c[1, 2] = V
    assert _code(verify_chain_greedy, c, p) == "SR903"
    assert _code(verify_chain_sampling, c, p, q, keys=torch.tensor([0, 1])) == "SR903"
    c[1, 2] = -1
    assert _code(verify_chain_sampling, c, p, q, keys=torch.tensor([0, 1])) == "SR903"
    # ... but ignored beyond the request's verify length
    lens = torch.tensor([3, 2])
    assert verify_chain_greedy(c, p, verify_lens=lens).accept_len.shape == (B,)
    assert _code(verify_chain_greedy_from_predict, c, c.abs(), vocab_size=V) == "SR903"


def test_verify_lens_out_of_range():
    c, p, q = _inputs()
    assert _code(verify_chain_greedy, c, p, verify_lens=torch.tensor([0, 3])) == "SR903"
    assert _code(verify_chain_sampling, c, p, q, verify_lens=torch.tensor([4, 3])) == "SR903"


def test_invalid_probability_values():
    """With check_values=True every value is checked, in rows the rule reads or not (the CPU
    default checks what the rule reads: tests/kernels/test_chain_default_checks.py)."""
    c, p, q = _inputs()
    bad_q = q.clone()
    bad_q[0, 1, 2] = float("nan")
    assert _code(verify_chain_sampling, c, p, bad_q, keys=torch.tensor([0, 1]),
                 check_values=True) == "SR904"
    bad_p = p.clone()
    bad_p[1, 0, 0] = -0.1
    assert _code(verify_chain_sampling, c, bad_p, q, keys=torch.tensor([0, 1]),
                 check_values=True) == "SR904"
    zero_p = p.clone()
    zero_p[0, 1] = 0.0
    assert _code(verify_chain_sampling, c, zero_p, q, keys=torch.tensor([0, 1]),
                 check_values=True) == "SR904"
    nan_logits = p.clone()
    nan_logits[0, 0, 0] = float("nan")
    assert _code(verify_chain_greedy, c, nan_logits) == "SR904"
    assert _code(verify_chain_sampling, c, p, q, coins=torch.ones(B, 2)) == "SR904"
    assert _code(verify_chain_sampling, c, p, q, coins=torch.full((B, 2), -0.5)) == "SR904"
    assert _code(verify_chain_sampling, c, p, q, coins=torch.full((B, 2), float("nan"))) == "SR904"
    negative = torch.tensor([0, -1])
    assert _code(verify_chain_sampling, c, p, q, positions=negative) == "SR904"
    assert _code(verify_chain_sampling, c, p, None, positions=negative) == "SR904"
    params = SamplingParams.of(B, temperature=1.0)
    assert _code(verify_chain_with_params, c, p.log(), q.log(), params=params,
                 positions=negative) == "SR904"
    assert _code(verify_chain_with_params, c, p, q, params=params, probabilities=True,
                 positions=negative) == "SR904"
    assert _code(verify_chain_relaxed, c, p, q, rule=RuleParams(mode=THRESHOLDS),
                 positions=negative) == "SR904"
    # keys are any 64-bit values, negative ones included
    keys = torch.tensor([-(2**63), 2**63 - 1])
    assert verify_chain_sampling(c, p, q, keys=keys).accept_len.shape == (B,)


def test_invalid_scalars():
    c, p, q = _inputs()
    assert _code(ChainVerifier, num_draft_tokens=0) == "SR904"
    assert _code(ChainVerifier, num_draft_tokens=None) == "SR904"
    assert _code(verify_chain_greedy, c, p, backend="cuda") == "SR116"
    assert _code(verify_chain_greedy, c, p, backend="triton", block_v=48) == "SR904"


def test_errors_render_with_fix():
    c, p, q = _inputs()
    with pytest.raises(KernelInputError) as err:
        verify_chain_sampling(c, p, q[:, :1])
    text = str(err.value)
    assert "draft_probs" in text and "Fix:" in text and "SR900" in text
    assert isinstance(err.value, ValueError)
