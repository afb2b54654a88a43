"""The drafter-invariant chain rule: every emitted token is plain keyed sampling's token at its
position (`sample_tokens`, the SAMPLE-role race), whatever the drafts; torch, Triton (the
interpreter) and the reference agree token for token, with and without per-request parameters,
ragged verify lengths and greedy requests mixed in."""

import pytest
import torch

from specreg.kernels.chain import (
    sample_tokens,
    sampling_inputs,
    verify_chain_invariant,
    verify_chain_sampling,
)
from specreg.kernels.chain.reference import verify_chain_invariant_reference
from specreg.kernels.chain_params import prepare_chain_params, verify_chain_with_params
from specreg.kernels.chain_params.reference import verify_chain_with_params_reference
from specreg.contract.sampling_params import SamplingParams

B, N, V = 6, 4, 300  # 300: three race blocks, the last one partial


def _plain(p, keys, positions):
    """Plain keyed sampling of every row: [b, n] tokens, row i at positions + i."""
    return torch.stack(
        [sample_tokens(p[:, i], keys=keys, positions=positions + i) for i in range(p.shape[1])], 1
    )


def _case(seed):
    g = torch.Generator().manual_seed(seed)
    p = torch.softmax(torch.randn(B, N, V, generator=g) * 3, -1)
    keys = torch.arange(B, dtype=torch.int64) * 1_000_003 - 77
    positions = torch.randint(0, 1000, (B,), generator=g)
    plain = _plain(p, keys, positions)
    candidates = torch.cat([torch.zeros(B, 1, dtype=torch.int64), plain[:, : N - 1]], 1)
    for r in range(1, B - 1):  # request r's draft r - 1 is wrong; the first and last match all
        column = min(r, N - 1)
        candidates[r, column] = (candidates[r, column] + 1) % V
    return p, keys, positions, plain, candidates


@pytest.mark.parametrize("lens", [None, [4, 1, 3, 2, 4, 2]])
def test_invariant_triton_equals_torch_and_the_reference(lens):
    p, keys, positions, plain, candidates = _case(0)
    verify_lens = None if lens is None else torch.tensor(lens)
    keyed = dict(keys=keys, positions=positions, verify_lens=verify_lens)
    on_torch = verify_chain_invariant(candidates, p, backend="torch", **keyed)
    on_triton = verify_chain_invariant(candidates, p, backend="triton", **keyed)
    inputs = sampling_inputs(candidates, p, None, coins=None, generator=None,
                             check_values=True, **keyed)
    reference = verify_chain_invariant_reference(inputs)
    for found in (on_triton, reference):
        assert torch.equal(found.accept_len, on_torch.accept_len)
        assert torch.equal(found.output_tokens, on_torch.output_tokens)
    # every emitted token is plain sampling's at its position
    for r in range(B):
        emitted = int(on_torch.accept_len[r]) + 1
        assert on_torch.output_tokens[r, :emitted].tolist() == plain[r, :emitted].tolist()
    assert int(on_torch.accept_len[0]) == (N - 1 if lens is None else lens[0] - 1)


def test_invariant_tokens_do_not_depend_on_the_drafts():
    """Two drafters on the same rows: the tokens each emits are plain sampling's, so where both
    reach a position they emit the same token there; the standard rule (control) emits a
    correction in the RESIDUAL role, which differs from the plain token for some requests."""
    p, keys, positions, plain, _ = _case(1)
    g = torch.Generator().manual_seed(9)
    random_drafts = torch.randint(0, V, (B, N), generator=g)
    found = verify_chain_invariant(random_drafts, p, keys=keys, positions=positions)
    assert torch.equal(found.bonus, torch.where(
        found.accept_len == 0, plain[:, 0], plain[torch.arange(B), found.accept_len.long()]
    ))
    q = torch.softmax(torch.randn(B, N - 1, V, generator=g), -1)
    standard = verify_chain_sampling(random_drafts, p, q, keys=keys, positions=positions)
    stopped = standard.accept_len.long()
    assert bool((standard.bonus != plain[torch.arange(B), stopped]).any())


def test_params_invariant_triton_equals_torch_and_the_reference():
    """Greedy requests keep plain greedy; sampled ones take the race of their processed rows,
    which is plain sampling through the same path without drafts (n = 1)."""
    g = torch.Generator().manual_seed(2)
    logits = torch.randn(B, N, V, generator=g) * 2
    params = SamplingParams.of(
        B, temperature=[0.0, 0.7, 1.0, 1.3, 0.9, 1.0], top_k=[0, 20, 0, 5, 0, 50],
        top_p=[1.0, 0.9, 0.8, 1.0, 0.95, 1.0], min_p=[0.0, 0.0, 0.05, 0.0, 0.0, 0.1],
        seed=[-1, 4, -1, 9, -1, -1],
    )
    keys = torch.arange(B, dtype=torch.int64) + 500
    positions = torch.arange(B, dtype=torch.int64) * 7
    anchor = torch.zeros(B, 1, dtype=torch.int64)
    plain = torch.stack([
        verify_chain_with_params(anchor, logits[:, i:i + 1].clone(), None, params=params,
                                 keys=keys, positions=positions + i).bonus
        for i in range(N)
    ], 1)
    candidates = torch.cat([anchor, plain[:, : N - 1]], 1)
    candidates[2, 2] = (candidates[2, 2] + 1) % V
    keyed = dict(params=params, keys=keys, positions=positions, invariant=True)
    on_torch = verify_chain_with_params(candidates, logits.clone(), None, backend="torch", **keyed)
    on_triton = verify_chain_with_params(candidates, logits.clone(), None, backend="triton",
                                         **keyed)
    reference = verify_chain_with_params_reference(
        prepare_chain_params(candidates, logits.clone(), None, **keyed)
    )
    for found in (on_triton, reference):
        assert torch.equal(found.output_tokens, on_torch.output_tokens)
    assert on_torch.accept_len.tolist() == [3, 3, 1, 3, 3, 3]
    for r in range(B):
        emitted = int(on_torch.accept_len[r]) + 1
        assert on_torch.output_tokens[r, :emitted].tolist() == plain[r, :emitted].tolist()
    assert torch.equal(plain[0], logits[0].argmax(-1))  # the greedy request: plain greedy

