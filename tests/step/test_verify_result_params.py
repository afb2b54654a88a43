"""The plan's verifiers hand the per-request parameter error flag through the unified VerifyResult."""

from __future__ import annotations

import torch

from specreg import Registry
from specreg.contract.sampling_params import SamplingParams


def test_chain_verifier_result_carries_param_error_when_value_checks_are_off():
    plan = Registry.load().resolve({"algorithm": "dspark", "num_draft_tokens": 4})
    verifier = plan.verifier.chain
    verifier.check_values = False  # the GPU path: flag the request, never raise
    b, n, vocab = 3, 4, 16
    g = torch.Generator().manual_seed(0)
    candidates = torch.randint(0, vocab, (b, n), generator=g)
    logits = torch.randn(b, n, vocab, generator=g)
    params = SamplingParams.of(batch=b, temperature=[0.0, 1.0, -1.0], seed=[1, 2, 3])
    result = verifier.verify_from_logits(candidates, logits, params=params)
    assert result.param_error is not None
    assert result.param_error.tolist() == [False, False, True]
    assert int(result.num_accepted[2]) == 0
    assert int(result.bonus[2]) == -1
    # The greedy request is untouched by its neighbour's bad parameters.
    greedy = verifier.verify_greedy(candidates[:1], logits[:1])
    assert torch.equal(result.output_tokens[0], greedy.output_tokens[0])
