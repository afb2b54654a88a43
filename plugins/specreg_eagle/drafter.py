"""`EagleDrafter`, the eagle plan's drafter: the draft loop, from draft model outputs to a tree.

`plan.drafter` holds it for eagle / eagle3 (a `TreeDrafterProtocol`). It turns the draft
model's outputs into an EAGLE draft tree: each step takes the draft model's logits and hidden
states, keeps the top-k tokens per branch (`select_top_k_tokens`, the plugin's kernel), and
after the last step `tree` keeps the best `num_draft_tokens - 1` drafts
(`organize_draft_results`) and builds the verify tree (the core's `build_tree`). The number of
steps taken picks the adaptive candidate: its verify width comes from the plan.

With per-request `SamplingParams` (`start(..., params=)`), sampled requests expand each branch
with K children drawn WITHOUT replacement from the filtered q the tree verifier reads
(Gumbel-top-k, `specreg.step.draft_sampling.sample_children`), ranked by weights that do not depend
on which tokens were drawn, and `draft_logits` gives the verifier each node's q source, so the
verifier's recursive rejection rule ("with q") runs; greedy requests keep the deterministic
top-k exactly as without params.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import attrs
import torch

from specreg.backend import requested_backend
from specreg.step.call_keywords import checked_keywords
from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import FLOAT_DTYPES, check_dtype, check_shape, check_tensor
from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, filter_rule
from specreg.contract.memory import Buffer
from specreg_eagle.kernels.select_topk import organize_draft_results, select_top_k_tokens
from specreg.kernels.tree_build import build_tree
from specreg.kernels.tree_build.types import TreeBuildResult
from specreg.kernels.tree_lengths import cut_tree
from specreg.contract.tree_sizes import tree_buffers
from specreg_eagle.sizes import draft_buffers

if TYPE_CHECKING:
    from specreg.contract.sampling_params import SamplingParams


@attrs.frozen(kw_only=True)
class TreeDraft:
    """A draft tree in progress after `steps` selection steps.

    `input_ids` int64 [b*topk] and `hidden` [b*topk, H] are what the draft model runs next;
    `scores` [b, topk] the cumulative probabilities of the current branches (for sampled
    requests, the product of the branch's ranking weights). With `params` (a draft started with
    per-request parameters) `logits_list` holds the draft logits each step's children were
    drawn from ([b, V] at step 0, [b*topk, V] after), and `generator` draws the noise.
    """

    steps: int
    input_ids: torch.Tensor
    hidden: torch.Tensor
    scores: torch.Tensor
    score_list: tuple[torch.Tensor, ...]
    token_list: tuple[torch.Tensor, ...]
    parents_list: tuple[torch.Tensor, ...]
    params: SamplingParams | None = None
    generator: torch.Generator | None = None
    logits_list: tuple[torch.Tensor, ...] = ()


class EagleDrafter:
    """Top-k selection and tree assembly for one resolved eagle plan.

    `widths_by_steps` maps every step count the plan serves (the main config's and each
    adaptive candidate's) to its verify width; `num_steps` and `num_draft_tokens` are the
    largest. The kernel backend is fixed when the drafter is built (`backend`).
    """

    needs = "target_hidden_states"  # specreg.contract.protocols.DRAFTER_NEEDS

    def __init__(
        self,
        *,
        topk: int,
        widths_by_steps: Mapping[int, int],
        mask_mode: str = "full",
        check_values: bool | None = None,
        filter_order: str | None = None,
    ) -> None:
        self.topk = int(topk)
        self.widths_by_steps = dict(sorted(widths_by_steps.items()))
        self.num_steps = max(self.widths_by_steps)
        self.num_draft_tokens = max(self.widths_by_steps.values())
        self.gamma = self.num_draft_tokens - 1
        self.mask_mode = mask_mode
        self.check_values = check_values
        self.backend = requested_backend()
        self.filter_order = filter_rule(filter_order or DEFAULT_FILTER_ORDER).name

    def _topk(
        self, logits: torch.Tensor, rows: int, params: SamplingParams | None = None,
        generator: torch.Generator | None = None,
    ) -> tuple[torch.Tensor, torch.Tensor]:
        check_tensor("logits", logits)
        check_shape("logits", logits, (rows, None))
        check_dtype("logits", logits, FLOAT_DTYPES)
        if logits.shape[1] < self.topk:
            raise KernelInputError(
                problem(
                    "SR900",
                    f"logits has a vocab of {logits.shape[1]}, fewer than topk={self.topk}",
                    accepted=f"logits [{rows}, V] with V >= {self.topk}",
                    fix="pass the draft model's full-vocab logits",
                    field="logits",
                )
            )
        if params is None:
            probs = torch.softmax(logits.float(), dim=-1)
            return torch.topk(probs, self.topk, dim=-1)
        from specreg.step.draft_sampling import row_params, sample_children

        drawn = sample_children(
            logits, row_params(params, rows // params.batch_size), self.topk,
            generator=generator, filter_order=self.filter_order, backend=self.backend,
            check_values=self.check_values,
        )
        return drawn.weights, drawn.tokens

    @checked_keywords
    def start(
        self, logits: torch.Tensor, hidden: torch.Tensor, *, params: SamplingParams | None = None,
        generator: torch.Generator | None = None,
    ) -> TreeDraft:
        """Step 0 from the draft-extend output: `logits` [b, V], `hidden` [b, H]. `params`
        (b requests) samples the children of sampled requests from their filtered q, with
        noise from `generator` (never the verifier's coins); every later step does too."""
        b = check_tensor("logits", logits).shape[0] if logits.dim() else -1
        topk_p, topk_index = self._topk(logits, b, params, generator)
        return self._select(None, topk_p, topk_index, hidden, params=params, generator=generator,
                            logits=logits)

    def step(self, draft: TreeDraft, logits: torch.Tensor, hidden: torch.Tensor) -> TreeDraft:
        """One more level: `logits` [b*topk, V] and `hidden` [b*topk, H] of the draft model
        run on `draft.input_ids`."""
        if draft.steps >= self.num_steps:
            raise KernelInputError(
                problem(
                    "SR214",
                    f"the draft already has {draft.steps} steps, the most this plan serves",
                    accepted=f"at most {self.num_steps} draft steps "
                    f"(served step counts: {list(self.widths_by_steps)})",
                    fix="build the tree with drafter.tree(draft, ...) now",
                    field="draft",
                )
            )
        topk_p, topk_index = self._topk(
            logits, draft.input_ids.shape[0], draft.params, draft.generator
        )
        return self._select(draft, topk_p, topk_index, hidden, params=draft.params,
                            generator=draft.generator, logits=logits)

    def _select(
        self, draft: TreeDraft | None, topk_p: torch.Tensor, topk_index: torch.Tensor,
        hidden: torch.Tensor, *, params: SamplingParams | None,
        generator: torch.Generator | None, logits: torch.Tensor,
    ) -> TreeDraft:
        """`draft` (None before step 0) one level deeper."""
        i = draft.steps if draft is not None else 0
        input_ids, hidden, scores, (step_scores, step_tokens, parents) = select_top_k_tokens(
            i, topk_p, topk_index, hidden, draft.scores if draft is not None else None, self.topk
        )
        lists = ((), (), ()) if draft is None else (
            draft.score_list, draft.token_list, draft.parents_list
        )
        return TreeDraft(
            steps=i + 1,
            input_ids=input_ids,
            hidden=hidden,
            scores=scores,
            score_list=(*lists[0], step_scores),
            token_list=(*lists[1], step_tokens),
            parents_list=(*lists[2], parents),
            params=params,
            generator=generator,
            logits_list=() if params is None else (
                *(draft.logits_list if draft is not None else ()), logits),
        )

    def width_for(self, steps: int) -> int:
        """The verify width of a tree drafted in `steps` steps (SR214 if the plan has none)."""
        if steps not in self.widths_by_steps:
            raise KernelInputError(
                problem(
                    "SR214",
                    f"a draft of {steps} steps is not one of the step counts this plan serves",
                    accepted=", ".join(str(s) for s in self.widths_by_steps),
                    fix="draft the main config's num_steps or one adaptive candidate's",
                    field="draft",
                )
            )
        return self.widths_by_steps[steps]

    @checked_keywords
    def tree(
        self,
        draft: TreeDraft,
        bonus_tokens: torch.Tensor,
        seq_lens: torch.Tensor,
        *,
        mask_mode: str | None = None,
        seq_lens_sum: int | None = None,
        draft_lengths: Any = None,
    ) -> TreeBuildResult:
        """Keep the best drafts and build the verify tree rooted at `bonus_tokens` [b].
        `draft_lengths` [b] (0..steps, `specreg.step.draft_lengths`): request r's tree keeps only
        its nodes at depth <= draft_lengths[r] (0: the root alone); the width stays the plan's."""
        width = self.width_for(draft.steps)
        parent_list, top_scores_index, draft_tokens = organize_draft_results(
            draft.score_list, draft.token_list, draft.parents_list, width
        )
        tree = build_tree(
            bonus_tokens, parent_list, top_scores_index, draft_tokens, seq_lens,
            topk=self.topk, depth=draft.steps, num_verify_tokens=width,
            mask_mode=mask_mode or self.mask_mode, seq_lens_sum=seq_lens_sum,
            check_values=self.check_values, backend=self.backend,
        )
        return cut_tree(tree, draft_lengths, depth=draft.steps, check_values=self.check_values)

    def draft_logits(self, draft: TreeDraft) -> torch.Tensor:
        """float32 [b, N, V]: row t holds the draft logits verify node t's children were drawn
        from (zeros for a node never expanded), for `verify_from_logits(..., draft_logits=)`.
        Needs a draft started with `params=` (SR928 otherwise)."""
        if draft.params is None:
            raise KernelInputError(
                problem(
                    "SR928",
                    "draft_logits needs a draft started with params=: a deterministic top-k "
                    "draft has no q to verify against",
                    accepted="drafter.start(logits, hidden, params=SamplingParams...)",
                    fix="start the draft with the batch's params=, or verify without "
                    "draft_logits (the target-only rule)",
                    field="draft",
                )
            )
        width = self.width_for(draft.steps)
        _, top_scores_index, _ = organize_draft_results(
            draft.score_list, draft.token_list, draft.parents_list, width
        )
        root = draft.logits_list[0]
        b, vocab = root.shape
        k = self.topk
        device = root.device
        # One table of every step's logits rows (plus a zero row, the last), and for each
        # drafted global id the table row its children were drawn from (the zero row: none);
        # the root's children come from the draft-extend logits, row r of the table.
        table = torch.cat(
            [root.float(), *(step.float() for step in draft.logits_list[1:]),
             torch.zeros((1, vocab), dtype=torch.float32, device=device)]
        )
        drafted = sum(t.shape[1] for t in draft.token_list)
        source = torch.full((b, drafted), table.shape[0] - 1, dtype=torch.int64, device=device)
        requests = torch.arange(b, device=device)[:, None]
        for s in range(1, len(draft.logits_list)):
            ids = (torch.arange(k, device=device).expand(b, k) if s == 1
                   else draft.parents_list[s - 1].to(torch.int64))
            source.scatter_(1, ids, b + (s - 1) * b * k + requests * k
                            + torch.arange(k, device=device))
        nodes = torch.cat([requests, source.gather(1, top_scores_index.to(torch.int64))], dim=1)
        return table.index_select(0, nodes.flatten()).view(b, width, vocab)

    def memory(self, *, context_len: int = 0) -> list[Buffer]:
        """Per request at the most steps and the largest width: the draft lists, the kept
        drafts and the verify tree (the `full` mask at `context_len` context tokens)."""
        return [
            *draft_buffers(self.topk, self.num_steps, self.num_draft_tokens),
            *tree_buffers(self.num_draft_tokens, self.mask_mode, context_len=context_len),
        ]

    def describe(self) -> str:
        return (
            f"EagleDrafter(topk={self.topk}, widths by steps={self.widths_by_steps}, "
            f"mask_mode={self.mask_mode})"
        )

    __repr__ = describe
