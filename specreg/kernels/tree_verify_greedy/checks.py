"""Input validation shared by greedy and sampling tree verification, and their vocabulary tile.

Tree layout (b requests, N nodes): `candidates` [b, N] the node tokens (node 0 = root);
`retrieve_index` [b, N] a node's flat row; `retrieve_next_token` / `retrieve_next_sibling`
[b, N] the first-child / next-sibling links (-1 = none).
"""

from __future__ import annotations

import torch

from specreg.errors import KernelInputError, problem
from specreg.integers import require_int
from specreg.kernels.checks import (
    FLOAT_DTYPES,
    INDEX_DTYPES,
    check_dtype,
    check_index_range,
    check_shape,
)
from specreg.kernels.triton_shim import vocab_tile

#: The verify kernels' default vocabulary tile (their per-tile state is wider than a plain
#: row reduction's, so it is half the shim's default).
VERIFY_BLOCK_V = 1024


def verify_tile(vocab: int, block_v: int | None) -> int:
    """BLOCK_V of the verify kernels (`vocab_tile` with the verify default)."""
    return vocab_tile(vocab, block_v, default=VERIFY_BLOCK_V)


def check_tree_inputs(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    depth: int,
) -> tuple[int, int]:
    """Shapes and dtypes of the tree tensors, and `depth` >= 1; returns (b, N)."""
    check_shape("candidates", candidates, (None, None))
    b, n = candidates.shape
    if n < 1:
        raise KernelInputError(
            problem("SR900", "candidates has no root column", accepted="[b, N] with N >= 1",
                    fix="pass the tree's tokens including the root", field="candidates")
        )
    for name, tensor in (
        ("candidates", candidates),
        ("retrieve_index", retrieve_index),
        ("retrieve_next_token", next_token),
        ("retrieve_next_sibling", next_sibling),
    ):
        check_shape(name, tensor, (b, n))
        check_dtype(name, tensor, INDEX_DTYPES)
    require_int("depth", depth, low=1, fix="pass num_steps of the draft loop")
    return b, n


def check_tree_rows(b: int, n: int, **rows: torch.Tensor | None) -> int:
    """Shapes and dtypes of a target (first keyword, [b, N, V], V >= 1) and an optional draft
    (second keyword, [b, N, V]); returns V."""
    (target_name, target), (draft_name, draft) = rows.items()
    assert target is not None
    check_shape(target_name, target, (b, n, None))
    check_dtype(target_name, target, FLOAT_DTYPES)
    vocab = target.shape[2]
    if vocab < 1:
        raise KernelInputError(
            problem("SR900", f"{target_name} has an empty vocab", accepted="V >= 1",
                    fix="pass the rows over the whole vocab", field=target_name)
        )
    if draft is not None:
        check_shape(draft_name, draft, (b, n, vocab))
        check_dtype(draft_name, draft, FLOAT_DTYPES)
    return vocab


def check_tree_values(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    vocab: int | None,
) -> None:
    """SR903 on the tokens (when `vocab` is known), rows and links (reads the data)."""
    b, n = candidates.shape
    if vocab is not None:
        check_index_range("candidates", candidates, 0, vocab)
    check_index_range("retrieve_index", retrieve_index, 0, b * n)
    check_index_range("retrieve_next_token", next_token, 1, n, allow=(-1,))
    check_index_range("retrieve_next_sibling", next_sibling, 1, n, allow=(-1,))
