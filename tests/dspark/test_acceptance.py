"""DSpark / DFlash block verification under the plan's acceptance rule: the rule reaches the
logits path (q = softmax(corrected / T)), ragged verify included, and the lossless default is
the plan's verifier unchanged."""

import torch

from specreg import Registry
from specreg.kernels.relaxed import RuleParams, verify_chain_relaxed


def _plan(algorithm, acceptance=None):
    config = {"algorithm": algorithm, "num_draft_tokens": 5}
    return Registry.load().resolve(config | ({"acceptance": acceptance} if acceptance else {}))


def test_block_verifiers_apply_the_plans_rule():
    gen = torch.Generator().manual_seed(3)
    b, n, vocab = 6, 5, 40
    target = 2 * torch.randn(b, n, vocab, generator=gen)
    draft = target[:, :-1] + torch.randn(b, n - 1, vocab, generator=gen)
    candidates = torch.cat([torch.zeros(b, 1, dtype=torch.int64), draft.argmax(-1)], 1)
    lens = torch.tensor([5, 3, 1, 5, 2, 4])
    keys = torch.arange(b) + 5  # one stream key per request, the same for every verifier
    for algorithm in ("dflash", "dspark"):
        lossless = _plan(algorithm)
        relaxed = _plan(algorithm, {"threshold_acc": 0.3, "threshold_single": 0.5})
        assert relaxed.lossy and not lossless.lossy and "LOSSY" in relaxed.verifier.describe()
        ragged = {"verify_lens": lens} if algorithm == "dspark" else {}
        got = relaxed.verifier.verify_sampling_from_logits(
            candidates, target, draft, temperature=0.7, keys=keys, **ragged)
        want = verify_chain_relaxed(
            candidates, torch.softmax(target / 0.7, -1), torch.softmax(draft / 0.7, -1),
            rule=RuleParams(mode=0, threshold_single=0.5, threshold_acc=0.3), keys=keys,
            verify_lens=ragged.get("verify_lens"))
        assert torch.equal(got.output_tokens, want.output_tokens)
        base = lossless.verifier.verify_sampling_from_logits(
            candidates, target, draft, temperature=0.7, keys=keys, **ragged)
        assert bool((got.num_accepted >= base.num_accepted).all())
        assert int(got.num_accepted.sum()) > int(base.num_accepted.sum())
