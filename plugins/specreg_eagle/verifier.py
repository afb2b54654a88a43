"""`EagleVerifier`, the eagle plan's verifier: the core's tree verifier, building trees from the
EAGLE draft loop's lists too.

`plan.verifier` holds it for eagle / eagle3. Verification is the core's `TreeVerifier`
(`specreg.step.tree_verifier`, on the core tree kernels); this subclass adds what only EAGLE's
draft loop produces: `build_tree` from the per-step lists of `select_top_k_tokens`, organised by
the plan's `EagleDrafter`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

import torch

from specreg.contract.acceptance_rules import AcceptanceRule
from specreg.errors import KernelInputError, problem
from specreg.kernels.tree_build.types import TreeBuildResult
from specreg.step.call_keywords import checked_keywords
from specreg.step.tree_verifier import TreeVerifier
from specreg_eagle.drafter import EagleDrafter, TreeDraft


class EagleVerifier(TreeVerifier):
    """Builds EAGLE draft trees and verifies them, from tensors only.

    A generation loop drives it in two calls per step (b requests, N = num_draft_tokens):

    1. ``tree = verifier.build_tree(bonus_tokens, seq_lens, score_list=..., token_list=...,
       parents_list=...)`` with the per-step draft outputs of ``select_top_k_tokens`` (or with
       ``parent_list=, top_scores_index=, draft_tokens=`` already organised).
       ``bonus_tokens`` [b] is the last committed token of each request (the tree root),
       ``seq_lens`` [b] the committed length. ``tree.draft_tokens.view(b, N)`` are the tokens to
       run through the target, at ``tree.positions`` with attention mask ``tree.tree_mask``.
    2. ``out = verifier.verify_greedy(tree, target_logits)`` or
       ``out = verifier.verify_sampling(tree, target_probs, draft_probs=None, keys=None)``: the
       core `TreeVerifier`'s methods (see there for the keywords and the result).

    The plan's drafter (`EagleDrafter`) builds trees step by step from the draft model's
    logits; `build_tree` remains for already-collected lists.
    """

    def __init__(
        self,
        *,
        num_steps: int,
        topk: int,
        num_draft_tokens: int,
        mask_mode: str = "full",
        threshold_single: float = 1.0,
        threshold_acc: float = 1.0,
        check_values: bool | None = None,
        widths_by_steps: Mapping[int, int] | None = None,
        filter_order: str | None = None,
        acceptance: AcceptanceRule | None = None,
        verify_mode: str | None = None,
    ) -> None:
        super().__init__(
            num_steps=num_steps, topk=topk, num_draft_tokens=num_draft_tokens,
            mask_mode=mask_mode, threshold_single=threshold_single, threshold_acc=threshold_acc,
            check_values=check_values, widths_by_steps=widths_by_steps,
            filter_order=filter_order, acceptance=acceptance, verify_mode=verify_mode,
        )
        self._drafter = EagleDrafter(
            topk=self.topk, widths_by_steps=self.widths_by_steps, mask_mode=mask_mode,
            check_values=check_values, filter_order=self.filter_order,
        )

    @checked_keywords
    def build_tree(  # type: ignore[override]  # the draft lists widen the core's signature
        self,
        bonus_tokens: torch.Tensor,
        seq_lens: torch.Tensor,
        *,
        score_list: Sequence[torch.Tensor] | None = None,
        token_list: Sequence[torch.Tensor] | None = None,
        parents_list: Sequence[torch.Tensor] | None = None,
        parent_list: torch.Tensor | None = None,
        top_scores_index: torch.Tensor | None = None,
        draft_tokens: torch.Tensor | None = None,
        mask_mode: str | None = None,
        seq_lens_sum: int | None = None,
    ) -> TreeBuildResult:
        """The verify tree from the raw draft lists or the organised tree (see the class doc).

        The number of draft steps (``len(score_list)``, else the main config's) picks the
        candidate's verify width."""
        if score_list is not None:
            draft = TreeDraft(
                steps=len(score_list), input_ids=bonus_tokens, hidden=bonus_tokens,
                scores=bonus_tokens, score_list=tuple(score_list),
                token_list=tuple(token_list or ()), parents_list=tuple(parents_list or ()),
            )
            return self._drafter.tree(
                draft, bonus_tokens, seq_lens, mask_mode=mask_mode, seq_lens_sum=seq_lens_sum
            )
        if parent_list is None or top_scores_index is None or draft_tokens is None:
            raise KernelInputError(
                problem("SR213", "build_tree needs the draft lists or the organised tree",
                        accepted="score_list/token_list/parents_list, or parent_list/"
                        "top_scores_index/draft_tokens",
                        fix="pass the outputs of the draft loop", field="score_list")
            )
        return super().build_tree(
            bonus_tokens, seq_lens, parent_list=parent_list, top_scores_index=top_scores_index,
            draft_tokens=draft_tokens, mask_mode=mask_mode, seq_lens_sum=seq_lens_sum,
        )

