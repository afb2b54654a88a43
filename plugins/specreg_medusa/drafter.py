"""`MedusaDrafter`, the medusa plan's drafter: head logits to the static verify tree.

`plan.drafter` holds it (a `TreeDrafterProtocol`). Head d's `topk` tokens fill the nodes at
depth d + 1 of the static tree (`specreg_medusa.sizes`): choice c of head d is its c-th
token. The tree's mask, positions and links come from the core's `build_tree` kernel
(`specreg.kernels.tree_build`), fed the tree's draft global ids, so the plan's `TreeVerifier`
(`specreg.step.tree_verifier`) verifies it unchanged. Heads read only the target's hidden
state, so every node at one depth chooses from the same `topk` tokens. Two ways in:

- `tree_from_heads(head_logits [b, S, V], bonus_tokens, seq_lens)`: all heads at once;
- the tree-drafter protocol: `start(head 0 logits [b, V], hidden)`, `step(draft, next head's
  logits, hidden)`, `tree(draft, bonus_tokens, seq_lens)`. A step takes [b, V], or the
  [b * topk, V] a draft loop produces for the draft's branches (`draft.input_ids`: branch a
  holds choice a of every head so far); then each request's first branch, the top-1 chain
  through the heads, gives the head's logits.

Without per-request parameters a head's tokens are its deterministic top-k (by logit), and the
verifier runs the target-only rule when requests sample. With them
(`sample_tree_from_heads(..., params=)`, or `start(..., params=)` then `step`, `tree` and
`draft_probs`), a sampled request's head d draws its `topk` tokens WITHOUT replacement from its
filtered q (`specreg_medusa.heads.sample_heads`, which also states why one head's draws may
serve every node of a depth), `positions` being the absolute position of the depth-1 nodes, so
head d draws at the position its depth-(d + 1) nodes occupy, the convention of the tree
verifier and the history trees. Greedy requests (temperature 0) keep the deterministic top-k.
The drafter also gives the verifier each node's q (`draft_probs` [b, N, V]: row i is
q_depth(i) when node i's children are the first draws of its head in sibling order,
`runtime.children_heads`; zero for leaves, greedy requests, and nodes whose children are not
such a prefix, where the verifier runs the target-only rule), for
`TreeVerifier.verify_from_logits(tree, target_logits, params=, draft_probs=)`, whose
recursive rejection rule then reads q.

`make_heads(hidden_size=, vocab_size=)` builds the heads module (`specreg_medusa.heads.
MedusaHeads`) that a framework loads the checkpoint's weights into.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch

from specreg.backend import requested_backend
from specreg.contract.filter_order import DEFAULT_FILTER_ORDER, filter_rule
from specreg.contract.memory import PER_REQUEST, Buffer
from specreg.contract.sampling_params import SamplingParams
from specreg.contract.tree_sizes import tree_buffers
from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import INDEX_DTYPES, check_dtype, check_shape, check_tensor
from specreg.kernels.tree_build import build_tree
from specreg.kernels.tree_build.types import TreeBuildResult
from specreg.kernels.tree_lengths import cut_tree
from specreg.step.call_keywords import checked_keywords
from specreg_medusa.heads import (
    HeadSampling,
    MedusaHeads,
    head_sampling,
    head_topk,
    inputs_error,
    sample_heads,
)
from specreg_medusa.sizes import TreeLayout, eagle_layout


@attrs.frozen(kw_only=True)
class MedusaDraft:
    """The heads read so far: `head_tokens` int64 [b, steps, topk] (each head's tokens: its
    best first, or for sampled requests in draw order); `input_ids` [b * topk] and `hidden`
    [b * topk, H] the branches (branch a = choice a of every head so far), for a draft loop
    that runs per branch. A draft started with params= also holds its `sampling` and `head_q`
    float32 [b, steps, V], the q each head's tokens were drawn from (zero rows: greedy
    requests, and rows that could not be sampled without value checks)."""

    steps: int
    head_tokens: torch.Tensor
    input_ids: torch.Tensor
    hidden: torch.Tensor
    sampling: HeadSampling | None = None
    head_q: torch.Tensor | None = None


@attrs.frozen(kw_only=True)
class SampledTree:
    """A verify tree whose sampled requests' nodes were drawn from the heads' filtered q:
    `tree` (as `tree_from_heads` builds it) and `draft_probs` float32 [b, N, V], row i the q
    node i's children were drawn from (zero for a leaf, a greedy request, or children that are
    not the first draws of their head), for `verify_from_logits(tree, target_logits, params=,
    draft_probs=)`."""

    tree: TreeBuildResult
    draft_probs: torch.Tensor


class MedusaDrafter:
    """Static-tree drafting for one resolved medusa plan.

    `widths_by_steps` maps every head count the plan serves (the main config's and each
    adaptive candidate's) to its verify width; `num_steps` and `num_draft_tokens` are the
    largest. The tree layouts are computed once, here; the kernel backend is fixed here too.
    """

    needs = "target_hidden_states"  # specreg.contract.protocols.DRAFTER_NEEDS

    def __init__(
        self,
        *,
        topk: int,
        widths_by_steps: Mapping[int, int],
        mask_mode: str = "full",
        num_layers: int = 1,
        check_values: bool | None = None,
        filter_order: str | None = None,
    ) -> None:
        self.topk = int(topk)
        self.widths_by_steps = dict(sorted(widths_by_steps.items()))
        self.num_steps = max(self.widths_by_steps)
        self.num_draft_tokens = max(self.widths_by_steps.values())
        self.gamma = self.num_draft_tokens - 1
        self.mask_mode = mask_mode
        self.num_layers = num_layers
        self.check_values = check_values
        self.filter_order = filter_rule(filter_order or DEFAULT_FILTER_ORDER).name
        self.backend = requested_backend()
        self.layouts: dict[int, TreeLayout] = {
            s: eagle_layout(s, self.topk, n) for s, n in self.widths_by_steps.items()
        }
        self._device_layouts: dict[tuple[int, str], tuple[torch.Tensor, ...]] = {}

    def __repr__(self) -> str:
        return (
            f"MedusaDrafter(topk={self.topk}, widths by steps={self.widths_by_steps}, "
            f"mask_mode={self.mask_mode})"
        )

    describe = __repr__

    @checked_keywords
    def make_heads(
        self, *, hidden_size: int, vocab_size: int, num_heads: int | None = None
    ) -> MedusaHeads:
        """The (untrained) heads module for `num_heads` (default: the plan's num_steps)."""
        return MedusaHeads(
            num_heads=num_heads or self.num_steps, hidden_size=hidden_size,
            vocab_size=vocab_size, num_layers=self.num_layers,
        )

    def memory(self, *, context_len: int = 0) -> list[Buffer]:
        """Per request at the most heads and the largest width: the heads' top tokens, the
        kept drafts and the verify tree (the `full` mask at `context_len` context tokens)."""
        n = self.num_draft_tokens
        return [
            Buffer(name="head_topk_tokens", device_bytes=self.num_steps * self.topk * 8,
                   per=PER_REQUEST),
            Buffer(name="top_scores_index+draft_tokens", device_bytes=2 * (n - 1) * 8,
                   per=PER_REQUEST),
            *tree_buffers(n, self.mask_mode, context_len=context_len),
        ]

    # ------------------------------------------------------------------------------ heads
    def _head_topk(self, logits: torch.Tensor, rows: int, name: str) -> torch.Tensor:
        return head_topk(logits, rows, name, self.topk)

    def _draft(
        self, head_tokens: torch.Tensor, hidden: torch.Tensor, *,
        sampling: HeadSampling | None = None, head_q: torch.Tensor | None = None,
    ) -> MedusaDraft:
        """The draft over `head_tokens`; `hidden` per request [b, H] is kept per branch."""
        b, steps, k = head_tokens.shape
        return MedusaDraft(
            steps=steps, head_tokens=head_tokens,
            input_ids=head_tokens[:, -1].reshape(b * k),
            hidden=hidden.repeat_interleave(k, dim=0) if hidden.shape[0] == b else hidden,
            sampling=sampling, head_q=head_q,
        )

    def _sampling(
        self, params: SamplingParams, keys: torch.Tensor | None, positions: torch.Tensor | None,
        generator: torch.Generator | None, *, batch: int, vocab: int, device: torch.device,
    ) -> HeadSampling:
        """`head_sampling` under the plan's value checks."""
        return head_sampling(params, keys, positions, generator, batch=batch, vocab=vocab,
                             device=device, check_values=self.check_values)

    def _sample_heads(
        self, logits: torch.Tensor, first_head: int, sampling: HeadSampling, name: str
    ) -> tuple[torch.Tensor, torch.Tensor]:
        """`sample_heads` (tokens [b, s, topk], q [b, s, V]) under the plan's settings."""
        return sample_heads(logits, first_head, sampling, name, topk=self.topk,
                            filter_order=self.filter_order, backend=self.backend,
                            check_values=self.check_values)

    @checked_keywords
    def start(
        self, logits: torch.Tensor, hidden: torch.Tensor, *, params: SamplingParams | None = None,
        keys: torch.Tensor | None = None, positions: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
    ) -> MedusaDraft:
        """Head 0's logits [b, V]; `hidden` [b, H] the target's last hidden state (kept per
        branch for a per-branch draft loop). With `params` (b requests) sampled requests draw
        every head's tokens from its filtered q (see the module): `keys` [b] the requests' keys
        on the random stream (a seeded request's is its seed; missing ones are drawn once from
        `generator`), `positions` [b] the absolute output position of the depth-1 nodes (the
        verifier's `positions`: the tree's root position + 1); head d draws at positions + d.
        Without `positions` every head draws under fresh keys from `generator`."""
        check_tensor("logits", logits)
        check_shape("logits", logits, (None, None))
        if params is None:
            tokens = self._head_topk(logits, logits.shape[0], "logits")
            return self._draft(tokens[:, None, :], hidden)
        b, v = logits.shape
        sampling = self._sampling(params, keys, positions, generator, batch=b, vocab=v,
                                  device=logits.device)
        tokens, q = self._sample_heads(logits[:, None, :], 0, sampling, "logits")
        return self._draft(tokens, hidden, sampling=sampling, head_q=q)

    def step(self, draft: MedusaDraft, logits: torch.Tensor, hidden: torch.Tensor) -> MedusaDraft:
        """The next head's logits: [b, V], or [b * topk, V] per branch (the first branch of each
        request is used: the heads' top-1 chain). A draft started with params= samples it."""
        if draft.steps >= self.num_steps:
            raise inputs_error(
                f"the draft already read {draft.steps} heads, the most this plan serves",
                "draft", f"at most {self.num_steps} heads (served: {list(self.widths_by_steps)})",
                "build the tree with drafter.tree(draft, ...) now",
            )
        b, k = draft.head_tokens.shape[0], self.topk
        check_tensor("logits", logits)
        if logits.dim() == 2 and logits.shape[0] == b * k and k > 1:
            logits = logits[::k]
        if draft.sampling is None:
            tokens = self._head_topk(logits, b, "logits")
            head_tokens = torch.cat([draft.head_tokens, tokens[:, None, :]], dim=1)
            return self._draft(head_tokens, hidden)
        check_shape("logits", logits, (b, None))
        tokens, q = self._sample_heads(logits[:, None, :], draft.steps, draft.sampling, "logits")
        assert draft.head_q is not None
        if q.shape[-1] != draft.head_q.shape[-1]:
            raise inputs_error(
                f"head {draft.steps}'s logits have a vocabulary of {q.shape[-1]}, the earlier "
                f"heads' {draft.head_q.shape[-1]}", "logits",
                "every head's logits over the same vocabulary", "pass the heads' full logits",
            )
        return self._draft(
            torch.cat([draft.head_tokens, tokens], dim=1), hidden, sampling=draft.sampling,
            head_q=torch.cat([draft.head_q, q], dim=1),
        )

    def width_for(self, steps: int) -> int:
        """The verify width of a tree over `steps` heads (SR485 if the plan serves none)."""
        if steps not in self.widths_by_steps:
            raise inputs_error(
                f"a tree over {steps} heads is not one this plan serves",
                "draft", ", ".join(str(s) for s in self.widths_by_steps),
                "read the main config's num_steps heads or one adaptive candidate's",
            )
        return self.widths_by_steps[steps]

    def _layout_tensors(self, steps: int, device: torch.device) -> tuple[torch.Tensor, ...]:
        """(parent_list, ids, heads, choices, children_heads) of the layout, on `device`."""
        key = (steps, str(device))
        if key not in self._device_layouts:
            layout = self.layouts[steps]
            self._device_layouts[key] = tuple(
                torch.tensor(values, dtype=torch.int64, device=device)
                for values in (layout.parent_list, layout.ids, layout.heads, layout.choices,
                               layout.children_heads)
            )
        return self._device_layouts[key]

    @checked_keywords
    def tree(
        self,
        draft: MedusaDraft,
        bonus_tokens: torch.Tensor,
        seq_lens: torch.Tensor,
        *,
        mask_mode: str | None = None,
        seq_lens_sum: int | None = None,
        draft_lengths: Any = None,
    ) -> TreeBuildResult:
        """The static verify tree rooted at `bonus_tokens` [b] (the last committed tokens),
        over `seq_lens` [b] committed tokens before the root. `draft_lengths` [b] (0..steps):
        request r's tree keeps only its nodes at depth <= draft_lengths[r] (0: the root)."""
        width = self.width_for(draft.steps)
        layout = self.layouts[draft.steps]
        b = draft.head_tokens.shape[0]
        device = draft.head_tokens.device
        parents, ids, heads, choices, _ = self._layout_tensors(draft.steps, device)
        flat = draft.head_tokens.reshape(b, -1)
        draft_tokens = flat[:, heads * self.topk + choices]  # [b, N - 1]
        # One row per request, materialised: the Triton kernel reads rows at its own stride, so
        # an expanded view (stride 0) would hand every request after the first another row.
        tree = build_tree(
            bonus_tokens, parents.expand(b, -1).contiguous(), ids.expand(b, -1).contiguous(),
            draft_tokens, seq_lens,
            topk=layout.encoding_topk, depth=draft.steps, num_verify_tokens=width,
            mask_mode=mask_mode or self.mask_mode, seq_lens_sum=seq_lens_sum,
            check_values=self.check_values, backend=self.backend,
        )
        return cut_tree(tree, draft_lengths, depth=draft.steps, check_values=self.check_values)

    @checked_keywords
    def tree_from_heads(
        self,
        head_logits: torch.Tensor,
        bonus_tokens: torch.Tensor,
        seq_lens: torch.Tensor,
        *,
        mask_mode: str | None = None,
        seq_lens_sum: int | None = None,
        draft_lengths: Any = None,
    ) -> TreeBuildResult:
        """The verify tree from every head's logits at once: `head_logits` [b, S, V]
        (`draft_lengths` as in `tree`)."""
        b, steps, v = self._check_all_heads(head_logits)
        tokens = self._head_topk(head_logits.reshape(b * steps, v), b * steps, "head_logits")
        draft = self._draft(tokens.view(b, steps, self.topk), self._no_hidden(head_logits))
        return self.tree(
            draft, bonus_tokens, seq_lens, mask_mode=mask_mode, seq_lens_sum=seq_lens_sum,
            draft_lengths=draft_lengths,
        )

    @checked_keywords
    def sample_tree_from_heads(
        self,
        head_logits: torch.Tensor,
        bonus_tokens: torch.Tensor,
        seq_lens: torch.Tensor,
        *,
        params: SamplingParams,
        keys: torch.Tensor | None = None,
        positions: torch.Tensor | None = None,
        generator: torch.Generator | None = None,
        mask_mode: str | None = None,
        seq_lens_sum: int | None = None,
        draft_lengths: Any = None,
    ) -> SampledTree:
        """`tree_from_heads` with each request's parameters `params` (b requests): sampled
        requests draw head d's tokens from its filtered q without replacement (see the module),
        greedy ones keep the top-k. `keys` [b] as in `start`; `positions` [b] the absolute
        output position of the depth-1 nodes, by default `seq_lens + 1` (the verifier's
        default: the tree's root position + 1). Returns the tree and its `draft_probs`."""
        b, steps, v = self._check_all_heads(head_logits)
        check_tensor("seq_lens", seq_lens)
        check_shape("seq_lens", seq_lens, (b,))
        check_dtype("seq_lens", seq_lens, INDEX_DTYPES)
        if positions is None:
            positions = seq_lens.to(torch.int64) + 1
        sampling = self._sampling(params, keys, positions, generator, batch=b, vocab=v,
                                  device=head_logits.device)
        tokens, q = self._sample_heads(head_logits, 0, sampling, "head_logits")
        draft = self._draft(tokens, self._no_hidden(head_logits), sampling=sampling, head_q=q)
        tree = self.tree(
            draft, bonus_tokens, seq_lens, mask_mode=mask_mode, seq_lens_sum=seq_lens_sum,
            draft_lengths=draft_lengths,
        )
        return SampledTree(tree=tree, draft_probs=self.draft_probs(draft))

    def draft_probs(self, draft: MedusaDraft) -> torch.Tensor:
        """float32 [b, N, V] for `verify_from_logits(..., draft_probs=)`: row i is the q node
        i's children were drawn from, q of head depth(i), when they are the first draws of that
        head in sibling order (`runtime.children_heads`); zero for leaves, greedy requests and
        any other node (the target-only rule there). Needs a draft started with params=
        (SR928 otherwise)."""
        if draft.sampling is None or draft.head_q is None:
            raise KernelInputError(
                problem(
                    "SR928",
                    "draft_probs needs a draft started with params=: a deterministic top-k "
                    "draft has no q to verify against",
                    accepted="drafter.start(logits, hidden, params=SamplingParams...) or "
                    "drafter.sample_tree_from_heads(..., params=...)",
                    fix="start the draft with the batch's params=, or verify without "
                    "draft_probs (the target-only rule)",
                    field="draft",
                )
            )
        self.width_for(draft.steps)
        b, steps, v = draft.head_q.shape
        children_heads = self._layout_tensors(steps, draft.head_q.device)[4]
        zero_row = torch.zeros((b, 1, v), dtype=torch.float32, device=draft.head_q.device)
        table = torch.cat([draft.head_q, zero_row], dim=1)  # head `steps`: the zero row
        return table.index_select(1, torch.where(children_heads >= 0, children_heads, steps))

    def _check_all_heads(self, head_logits: torch.Tensor) -> tuple[int, int, int]:
        check_tensor("head_logits", head_logits)
        check_shape("head_logits", head_logits, (None, None, None))
        b, steps, v = head_logits.shape
        self.width_for(steps)
        return b, steps, v

    def _no_hidden(self, head_logits: torch.Tensor) -> torch.Tensor:
        """The empty per-branch hidden state of a draft built from all heads at once."""
        return torch.empty(head_logits.shape[0] * self.topk, 0, device=head_logits.device)
