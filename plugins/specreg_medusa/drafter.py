"""`MedusaDrafter`, the medusa plan's drafter: head logits to the static verify tree.

`plan.drafter` holds it (a `TreeDrafterProtocol`). Head d's `topk` best tokens fill the nodes at
depth d + 1 of the static tree (`specreg_medusa.runtime`); the tree's mask, positions and links
come from the EAGLE plugin's `build_tree` kernel, fed the tree's EAGLE numbering, so the
plan's `EagleVerifier` verifies it unchanged. Heads read only the target's hidden state, so
every node at one depth chooses from the same `topk` tokens. Two ways in:

- `tree_from_heads(head_logits [b, S, V], bonus_tokens, seq_lens)`: all heads at once;
- the tree-drafter protocol: `start(head 0 logits [b, V], hidden)`, `step(draft, next head's
  logits, hidden)`, `tree(draft, bonus_tokens, seq_lens)`. A step takes [b, V], or the
  [b * topk, V] a draft loop produces for the draft's branches (`draft.input_ids`: branch a
  holds choice a of every head so far); then each request's first branch, the top-1 chain
  through the heads, gives the head's logits.

`make_heads(hidden_size=, vocab_size=)` builds the heads module (Medusa's: per head,
`num_layers` residual SiLU blocks, then a bias-free linear map to the vocabulary) that a
framework loads the checkpoint's weights into.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import attrs
import torch
from specreg_eagle.kernels.tree_build import build_tree
from specreg_eagle.kernels.tree_build.types import TreeBuildResult
from specreg_eagle.kernels.tree_lengths import cut_tree
from specreg_eagle.runtime import tree_buffers

from specreg.backend import requested_backend
from specreg.errors import KernelInputError, problem
from specreg.kernels.checks import FLOAT_DTYPES, check_dtype, check_shape, check_tensor
from specreg.memory import PER_REQUEST, Buffer
from specreg_medusa.runtime import TreeLayout, eagle_layout


@attrs.frozen(kw_only=True)
class MedusaDraft:
    """The heads read so far: `head_tokens` int64 [b, steps, topk] (each head's best tokens,
    best first); `input_ids` [b * topk] and `hidden` [b * topk, H] the branches (branch a =
    choice a of every head so far), for a draft loop that runs per branch."""

    steps: int
    head_tokens: torch.Tensor
    input_ids: torch.Tensor
    hidden: torch.Tensor


def _inputs_error(message: str, field: str, accepted: str, fix: str) -> KernelInputError:
    return KernelInputError(problem("SR485", message, accepted=accepted, fix=fix, field=field))


class MedusaHeads(torch.nn.Module):
    """Medusa's heads: per head, `num_layers` blocks x + SiLU(W x + b), then W_out x."""

    def __init__(self, *, num_heads: int, hidden_size: int, vocab_size: int, num_layers: int = 1):
        super().__init__()
        self.blocks = torch.nn.ModuleList(
            torch.nn.ModuleList(torch.nn.Linear(hidden_size, hidden_size) for _ in range(num_layers))
            for _ in range(num_heads)
        )
        self.out = torch.nn.ModuleList(
            torch.nn.Linear(hidden_size, vocab_size, bias=False) for _ in range(num_heads)
        )

    def forward(self, hidden: torch.Tensor) -> torch.Tensor:
        """hidden [b, H] (the target's last hidden state) -> logits [b, num_heads, V]."""
        outs = []
        for blocks, out in zip(self.blocks, self.out, strict=True):
            x = hidden
            for block in blocks:
                x = x + torch.nn.functional.silu(block(x))
            outs.append(out(x))
        return torch.stack(outs, dim=1)


class MedusaDrafter:
    """Static-tree drafting for one resolved medusa plan.

    `widths_by_steps` maps every head count the plan serves (the main config's and each
    adaptive candidate's) to its verify width; `num_steps` and `num_draft_tokens` are the
    largest. The tree layouts are computed once, here; the kernel backend is fixed here too.
    """

    needs = "target_hidden_states"  # specreg.protocols.DRAFTER_NEEDS

    def __init__(
        self,
        *,
        topk: int,
        widths_by_steps: Mapping[int, int],
        mask_mode: str = "full",
        num_layers: int = 1,
        check_values: bool | None = None,
    ) -> None:
        self.topk = int(topk)
        self.widths_by_steps = dict(sorted(widths_by_steps.items()))
        self.num_steps = max(self.widths_by_steps)
        self.num_draft_tokens = max(self.widths_by_steps.values())
        self.gamma = self.num_draft_tokens - 1
        self.mask_mode = mask_mode
        self.num_layers = num_layers
        self.check_values = check_values
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
        check_tensor(name, logits)
        check_shape(name, logits, (rows, None))
        check_dtype(name, logits, FLOAT_DTYPES)
        if logits.shape[1] < self.topk:
            raise _inputs_error(
                f"{name} has a vocabulary of {logits.shape[1]}, fewer than topk={self.topk}",
                name, f"logits [{rows}, V] with V >= {self.topk}", "pass the heads' full logits",
            )
        return torch.topk(logits.float(), self.topk, dim=-1).indices

    def _draft(self, head_tokens: torch.Tensor, hidden: torch.Tensor) -> MedusaDraft:
        """The draft over `head_tokens`; `hidden` per request [b, H] is kept per branch."""
        b, steps, k = head_tokens.shape
        return MedusaDraft(
            steps=steps, head_tokens=head_tokens,
            input_ids=head_tokens[:, -1].reshape(b * k),
            hidden=hidden.repeat_interleave(k, dim=0) if hidden.shape[0] == b else hidden,
        )

    def start(self, logits: torch.Tensor, hidden: torch.Tensor) -> MedusaDraft:
        """Head 0's logits [b, V]; `hidden` [b, H] the target's last hidden state (kept per
        branch for a per-branch draft loop)."""
        b = check_tensor("logits", logits).shape[0] if logits.dim() else -1
        tokens = self._head_topk(logits, b, "logits")
        return self._draft(tokens[:, None, :], hidden)

    def step(self, draft: MedusaDraft, logits: torch.Tensor, hidden: torch.Tensor) -> MedusaDraft:
        """The next head's logits: [b, V], or [b * topk, V] per branch (the first branch of each
        request is used: the heads' top-1 chain)."""
        if draft.steps >= self.num_steps:
            raise _inputs_error(
                f"the draft already read {draft.steps} heads, the most this plan serves",
                "draft", f"at most {self.num_steps} heads (served: {list(self.widths_by_steps)})",
                "build the tree with drafter.tree(draft, ...) now",
            )
        b, k = draft.head_tokens.shape[0], self.topk
        check_tensor("logits", logits)
        if logits.dim() == 2 and logits.shape[0] == b * k and k > 1:
            logits = logits[::k]
        tokens = self._head_topk(logits, b, "logits")
        head_tokens = torch.cat([draft.head_tokens, tokens[:, None, :]], dim=1)
        return self._draft(head_tokens, hidden)

    def width_for(self, steps: int) -> int:
        """The verify width of a tree over `steps` heads (SR485 if the plan serves none)."""
        if steps not in self.widths_by_steps:
            raise _inputs_error(
                f"a tree over {steps} heads is not one this plan serves",
                "draft", ", ".join(str(s) for s in self.widths_by_steps),
                "read the main config's num_steps heads or one adaptive candidate's",
            )
        return self.widths_by_steps[steps]

    def _layout_tensors(self, steps: int, device: torch.device) -> tuple[torch.Tensor, ...]:
        key = (steps, str(device))
        if key not in self._device_layouts:
            layout = self.layouts[steps]
            self._device_layouts[key] = tuple(
                torch.tensor(values, dtype=torch.int64, device=device)
                for values in (layout.parent_list, layout.ids, layout.heads, layout.choices)
            )
        return self._device_layouts[key]

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
        parents, ids, heads, choices = self._layout_tensors(draft.steps, device)
        flat = draft.head_tokens.reshape(b, -1)
        draft_tokens = flat[:, heads * self.topk + choices]  # [b, N - 1]
        tree = build_tree(
            bonus_tokens, parents.expand(b, -1), ids.expand(b, -1), draft_tokens, seq_lens,
            topk=layout.encoding_topk, depth=draft.steps, num_verify_tokens=width,
            mask_mode=mask_mode or self.mask_mode, seq_lens_sum=seq_lens_sum,
            check_values=self.check_values, backend=self.backend,
        )
        return cut_tree(tree, draft_lengths, depth=draft.steps, check_values=self.check_values)

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
        check_tensor("head_logits", head_logits)
        check_shape("head_logits", head_logits, (None, None, None))
        b, steps, v = head_logits.shape
        self.width_for(steps)
        tokens = self._head_topk(head_logits.reshape(b * steps, v), b * steps, "head_logits")
        draft = MedusaDraft(
            steps=steps, head_tokens=tokens.view(b, steps, self.topk),
            input_ids=tokens.view(b, steps, self.topk)[:, -1].reshape(-1),
            hidden=torch.empty(b * self.topk, 0, device=head_logits.device),
        )
        return self.tree(
            draft, bonus_tokens, seq_lens, mask_mode=mask_mode, seq_lens_sum=seq_lens_sum,
            draft_lengths=draft_lengths,
        )
