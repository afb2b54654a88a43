"""The values of the tree-build family: its input bundle, its result and the packed-word dtype."""

from __future__ import annotations

import attrs
import torch


def bitpacked_dtype(num_verify_tokens: int) -> torch.dtype:
    """Word type of one packed mask row: uint8 (N <= 8), int16 (<= 16), int32 (<= 32).

    Bit j of a node's word is set when the node attends tree node j (bit 0 = the root). int16 and
    int32 hold the same bit patterns as SGLang's uint16/uint32 words.
    """
    if num_verify_tokens <= 8:
        return torch.uint8
    if num_verify_tokens <= 16:
        return torch.int16
    return torch.int32


@attrs.frozen
class TreeBuildInputs:
    """What every `build_tree` implementation takes for b requests of N tree nodes.

    `bonus_tokens` [b] (each tree's root), `parent_list` [b, K*(S-1)+1] ([b, 0] for depth 1),
    `top_scores_index` [b, N-1] and `draft_tokens` [b, N-1] (from `organize_draft_results`),
    `seq_lens` [b] (prefix lengths without drafts); `topk` = K, `depth` = S (bounds every
    ancestor walk), `num_verify_tokens` = N, `mask_mode` one of `specreg.contract.tree_sizes.MASK_MODES`,
    `seq_lens_sum` the `full` mask's prefix total (None: summed from `seq_lens`),
    `fill_prefix_mask` whether the `full` mask's prefix columns are written True.
    """

    bonus_tokens: torch.Tensor
    parent_list: torch.Tensor
    top_scores_index: torch.Tensor
    draft_tokens: torch.Tensor
    seq_lens: torch.Tensor
    topk: int = attrs.field(kw_only=True)
    depth: int = attrs.field(kw_only=True)
    num_verify_tokens: int = attrs.field(kw_only=True)
    mask_mode: str = attrs.field(default="full", kw_only=True)
    seq_lens_sum: int | None = attrs.field(default=None, kw_only=True)
    fill_prefix_mask: bool = attrs.field(default=True, kw_only=True)

    def total_seq(self) -> int:
        """The `full` mask's prefix total (synchronises when `seq_lens_sum` is None)."""
        if self.seq_lens_sum is not None:
            return int(self.seq_lens_sum)
        return int(self.seq_lens.to(torch.int64).sum())


@attrs.frozen(kw_only=True)
class TreeBuildResult:
    """What `build_tree` produces for b requests of N tree nodes.

    - `tree_mask`: `full` bool [seq_lens_sum*N + b*N*N] (request r's block starts at
      `N*N*r + N*sum(seq_lens[:r])`, each of its N rows has seq_lens[r] prefix columns then N tree
      columns); `qlen_only` bool [b*N*N]; `qlen_only_bitpacking` [b*N] words (`bitpacked_dtype`).
    - `positions` int64 [b*N]: seq_len + depth (root depth 0).
    - `retrieve_index` int64 [b, N] = r*N + i; `retrieve_next_token` int64 [b, N] first child
      (local index) or -1; `retrieve_next_sibling` int64 [b, N] next sibling (children listed in
      ascending local index) or -1.
    - `draft_tokens` int64 [b*N]: the root (bonus token) then the kept drafts of each request.
    - `invalid` int32 [b]: nonzero for requests whose tree is invalid (GPU path; the CPU path
      raises SR210 instead, so it is all zeros there).
    """

    tree_mask: torch.Tensor
    positions: torch.Tensor
    retrieve_index: torch.Tensor
    retrieve_next_token: torch.Tensor
    retrieve_next_sibling: torch.Tensor
    draft_tokens: torch.Tensor
    invalid: torch.Tensor
    mask_mode: str
    num_verify_tokens: int
