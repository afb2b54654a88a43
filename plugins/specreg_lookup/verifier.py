"""`LookupVerifier`, the ngram and suffix plans' verifier: specreg's chain verifier plus tree
verification of `LookupTree` proposals.

Chains (`verify_greedy`, `verify_sampling`, ragged through `verify_lens`) are specreg's
`ChainVerifier`; drafts that depend on the history alone carry one-hot q, so the with-draft rule
and the target-only rule agree. Trees (`verify_tree_greedy`, `verify_tree_sampling`) use the
`tree_verify` kernels, which walk the core's greedy tree kernel. The backend is fixed when the
plan builds it. A keyword a method does not take is SR930.
"""

from __future__ import annotations

import torch

from specreg.step.call_keywords import checked_keywords
from specreg.step.chain_verifier import ChainVerifier
from specreg.contract.protocols import VerifyResult
from specreg_lookup.kernels.match_tree import LookupTree
from specreg_lookup.kernels.tree_verify import verify_tree_greedy, verify_tree_sampling


class LookupVerifier(ChainVerifier):
    """Chain verification (the core's) and tree verification of history-drafted trees."""

    rules = ("greedy", "chain_sampling", "tree_greedy", "tree_sampling")

    @checked_keywords
    def verify_tree_greedy(
        self, tree: LookupTree, target_logits: torch.Tensor, *, draft_lengths: object = None
    ) -> VerifyResult:
        """Longest path matching the target's argmax; `target_logits` [b, N, V], row i after
        node i. `draft_lengths` [b]: request r verifies nodes at depth <= its length only."""
        self._refuse_lossy("verify_tree_greedy", synthetic_only=True)
        return verify_tree_greedy(tree.cut(draft_lengths, check_values=self.check_values),
                                  target_logits, backend=self.backend)

    @checked_keywords
    def verify_tree_sampling(
        self, tree: LookupTree, target_probs: torch.Tensor, *, keys: torch.Tensor | None = None,
        positions: torch.Tensor | None = None, generator: torch.Generator | None = None,
        draft_lengths: object = None,
    ) -> VerifyResult:
        """Tree sampling by each node's keyed plain-sampling token (exact for history-only
        drafts, and the drafter-invariant rule: the tokens equal plain keyed sampling, in either
        verify mode); `target_probs` [b, N, V], `keys` / `positions` [b] (the position of the
        root's children), `draft_lengths` as in `verify_tree_greedy`. A lossy plan rule is
        refused (SR196)."""
        self._refuse_lossy("verify_tree_sampling")
        return verify_tree_sampling(tree.cut(draft_lengths, check_values=self.check_values),
                                    target_probs, keys=keys, positions=positions,
                                    generator=generator, backend=self.backend)

    def __repr__(self) -> str:
        widths = list(self.widths)
        return f"LookupVerifier(num_draft_tokens={self.num_draft_tokens}, widths={widths})"
