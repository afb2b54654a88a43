"""The value the match_tree family returns and tree_verify takes: a draft tree per request."""

from __future__ import annotations

import attrs
import torch


@attrs.frozen(kw_only=True)
class LookupTree:
    """b draft trees of N = num_draft_tokens slots, nodes in breadth-first order.

    `tokens` int64 [b, N]: node 0 is the root (the request's last token), then the proposed
    nodes; unused slots hold the root token. `parents` int64 [b, N]: each node's parent slot
    (-1 for the root; unused slots 0, the root). `valid` bool [b, N]: the root and the proposed
    nodes. `depth` int64 [b, N]: 0 for the root. A parent's slot is always below its children's,
    and siblings carry distinct tokens, so at most one child of a node matches any token.
    """

    tokens: torch.Tensor
    parents: torch.Tensor
    valid: torch.Tensor
    depth: torch.Tensor

    @property
    def num_nodes(self) -> torch.Tensor:
        """Proposed nodes per request (the root not counted), int64 [b]."""
        return self.valid.sum(dim=1) - 1

    def ancestors(self) -> torch.Tensor:
        """bool [b, N, N]: row i marks node i and its ancestors (the attention mask a target
        forward of the tree uses, SGLang's tree_mask)."""
        b, n = self.tokens.shape
        eye = torch.eye(n, dtype=torch.bool, device=self.tokens.device).expand(b, n, n)
        mask = eye.clone()
        parent = self.parents.clamp(min=0)
        # node i's mask = its parent's mask + itself; parents come first, so one pass in order
        for i in range(1, n):
            mask[:, i] |= mask.gather(1, parent[:, i, None, None].expand(b, 1, n))[:, 0]
        return mask & self.valid[:, :, None] | eye

    def cut(self, draft_lengths: object, *, check_values: bool | None = None) -> LookupTree:
        """The trees with request r's nodes below depth draft_lengths[r] no longer valid
        (`specreg.step.draft_lengths`, 0..N-1; 0 leaves the root alone); `self` without lengths."""
        if draft_lengths is None:
            return self
        from specreg.kernels.checks import check_draft_lengths

        b, n = self.tokens.shape
        lengths = check_draft_lengths(
            draft_lengths, b, n - 1, device=self.tokens.device, check_values=check_values,
            what=f"a tree of {n} slots",
        )
        keep = self.depth <= lengths[:, None]
        keep[:, 0] = True
        return attrs.evolve(self, valid=self.valid & keep)
