"""`verify_tree_sampling`: lossless tree speculative sampling.

Layout (b requests, N tree nodes, V vocab): `candidates` [b, N] are the node tokens (node 0 =
root = bonus token of the previous step); `retrieve_index` [b, N] maps a node to its flat row
r*N + i; `retrieve_next_token` / `retrieve_next_sibling` [b, N] are the first-child / next-sibling
links (-1 = none), children in ascending local index, parents before children. Row i of
`target_logits` / `target_probs` [b, N, V] is the target's distribution for the token FOLLOWING
node i; row i of `draft_probs` [b, N, V] is q, the distribution node i's children were drawn from.

The wrapper validates (`checks`), fills in the stream's keys and coins, picks the backend and
dispatches (`sample_tree`) to `torch_impl.verify_tree_sampling_torch`,
`triton_impl.verify_tree_sampling_triton` or, on CPU with the backend chosen automatically and
numba installed (the `cpu` extra), `numba_impl.verify_tree_sampling_numba` for the target-only
rule (the torch path's tokens bit for bit; with q the torch path runs) (all take one
`TreeSamplingInputs`); `reference` is the plain per-request walk the tests hold them to. `specreg.kernels.tree_verify_params` runs
this rule under per-request sampling parameters.

Randomness: every draw reads the counter-based random stream (`specreg.kernels.random_stream`)
keyed by (request key, role, absolute position). Node c at depth d (the root 0) sits at
absolute position `positions + d - 1` (`positions`: the position of the depth-1 children, the
token the root's row verifies), and its acceptance uniform is the stream's uniform of (key,
ACCEPT role, that position, its token): one independent value per (position, draft token), the
chain family's acceptance coins at tree positions (`specreg.kernels.tree_coins`). Under
recursive rejection child c is tested with its own uniform; under the target-only rule the
children of P share one coin, the uniform of P's first child. The walk tries the children of
one node per position, so no two decisions of a walk read the same value, but for a repeated
sibling token under recursive rejection, which is rejected whatever its coin (its residual is 0
once it was rejected). A caller's `coins` [b, N] (SGLang's uniforms, for parity) replace them
in SGLang's layout: P's target-only coin `coins[:, P]`, child c's coin `coins[:, c - 1]`. The
final token is a race in
the RESIDUAL role at the position of the last accepted node's children, whether a child was
tried there or not: a tree drafter draws children from the SAMPLE role at that position, and a
tree pruned by those draws may stop at a leaf because of them, so the final draw never reads
them. Nothing depends on the request's row, the batch, chunking or the backend.

Sampling, per parent node P (reset whenever a child is accepted):
- Target-only (no `draft_probs`, or P's q row is all zero): children c_1 < c_2 < ... are tried
  with P's coin u; accept c_i when `u < (p(c_1) + ... + p(c_i)) / threshold_acc`
  or `p(c_i) >= threshold_single`, counting a token already tried at P as 0. With thresholds 1.0
  a child is accepted with probability exactly p(c_i) and otherwise the residual is p with the
  tried tokens removed: the emitted token is distributed as p for any fixed set of children.
- Recursive rejection sampling (P's q row has mass; thresholds are not used): the children must
  have been drawn from q WITHOUT replacement, in sibling order. With residual target p_i
  (p_1 = p) and q_i = q without the tokens drawn before c_i, renormalised, c_i is accepted when
  `u(c_i) * q_i(c_i) < p_i(c_i)`; on rejection p_{i+1} = norm(max(p_i - q_i, 0)).
  Each step emits exactly p_i, so the node emits exactly p. p_i is never materialised: it equals
  max(p - a_i q, 0) / W_i with a scalar a_i for untried tokens and a frozen coefficient per tried
  token (at most N - 1 per node, kept sparsely), and W_i is one reduction over the row.
- Final token: raced from the residual at the last accepted node (p itself when no child was
  tried); a residual with no mass (rounding) falls back to p. The race is the chain family's
  two-level exponential race (`specreg.kernels.tree_residual_draw`: the block masses, then one
  block's 128 weights), so both implementations read that row once, and it is exact: no 24-bit
  coin limits the tokens it can reach.

The torch walk decides the target-only rule for every node at once (a parent's decisions depend
only on its children and coin) and follows the accepted children for `depth` levels; with q it
walks N - 1 steps vectorised over requests, computing a residual mass only where a next sibling
will be tested and a node's masses only where the walk goes on below it.

No [b, N, V] temporaries, the caller's tensors are never written, no host synchronisation.
"""

from __future__ import annotations

from typing import Any

import torch

from specreg.backend import requested_backend, select_backend
from specreg.kernels.chain.checks import check_position_values, check_stream_keys
from specreg.kernels.checks import (
    check_probabilities,
    check_same_device,
    should_check_values,
)
from specreg.kernels.random_stream import stream_keys
from specreg.kernels.tree_coins import tree_coins
from specreg.kernels.tree_lengths import cut_below
from specreg.kernels.tree_verify_greedy.checks import (
    check_tree_inputs,
    check_tree_rows,
    check_tree_values,
)
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult
from specreg.kernels.tree_verify_sampling.checks import (
    check_coin_values,
    check_coins,
    check_thresholds,
)
from specreg.kernels.tree_verify_sampling.numba_impl import available as numba_available
from specreg.kernels.tree_verify_sampling.numba_impl import supports as numba_supports
from specreg.kernels.tree_verify_sampling.numba_impl import verify_tree_sampling_numba
from specreg.kernels.tree_verify_sampling.torch_impl import verify_tree_sampling_torch
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs

__all__ = ["sample_tree", "verify_tree_sampling"]


def verify_tree_sampling(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    retrieve_next_token: torch.Tensor,
    retrieve_next_sibling: torch.Tensor,
    target_probs: torch.Tensor,
    *,
    depth: int,
    draft_probs: torch.Tensor | None = None,
    keys: torch.Tensor | None = None,
    positions: torch.Tensor | None = None,
    coins: torch.Tensor | None = None,
    threshold_single: float = 1.0,
    threshold_acc: float = 1.0,
    generator: torch.Generator | None = None,
    check_values: bool | None = None,
    block_v: int | None = None,
    backend: str | None = None,
    draft_lengths: Any = None,
) -> TreeVerifyResult:
    """Tree speculative sampling (see the module docstring for both rules).

    `target_probs` [b, N, V] float; `draft_probs` None (target-only) or [b, N, V] (row i = q of
    node i's children; all-zero rows use the target-only rule). Draws are keyed by `keys`
    int64 [b] (each request's key: its seed, or a key drawn once for the request; missing ones
    are fresh keys from `generator`) and `positions` int64 [b] (the absolute output position of
    the depth-1 children, the token the root's row verifies; default 0): see the module
    docstring. `coins` [b, N] float in [0, 1) replaces the acceptance uniforms with a caller's
    (SGLang's layout: `coins[:, P]` parent P's target-only coin, `coins[:, c - 1]` child c's).
    Thresholds in (0, 1] apply to the target-only rule; 1.0 keeps it lossless. `backend`:
    'auto' | 'torch' | 'triton' | None (None reads SPECREG_KERNEL_BACKEND).
    `draft_lengths` [b] (0..depth; `specreg.step.draft_lengths`): request r verifies only the nodes
    at depth <= draft_lengths[r] (0: the root alone, one plain sample from its row).
    """
    b, n = check_tree_inputs(
        candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, depth
    )
    vocab = check_tree_rows(b, n, target_probs=target_probs, draft_probs=draft_probs)
    retrieve_next_token = cut_below(
        retrieve_next_token, retrieve_next_sibling, draft_lengths, depth=depth,
        check_values=check_values,
    )
    check_coins(coins, b, n)
    check_stream_keys(keys, positions, b)
    check_thresholds(threshold_single, threshold_acc)
    device = check_same_device(
        candidates=candidates, retrieve_index=retrieve_index,
        retrieve_next_token=retrieve_next_token, retrieve_next_sibling=retrieve_next_sibling,
        target_probs=target_probs, draft_probs=draft_probs, coins=coins, keys=keys,
        positions=positions,
    )
    if should_check_values(device, check_values):
        check_tree_values(
            candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, vocab
        )
        check_probabilities("target_probs", target_probs)
        if draft_probs is not None:
            check_probabilities("draft_probs", draft_probs, allow_zero_rows=True)
        check_coin_values(coins)
        check_position_values(positions)
    keys, positions = stream_keys(b, device, keys, positions, generator=generator)
    parent_coins, child_coins = tree_coins(
        candidates, retrieve_next_token, retrieve_next_sibling, keys, positions, coins
    )
    inputs = TreeSamplingInputs(
        candidates, retrieve_index, retrieve_next_token, retrieve_next_sibling, target_probs,
        draft_probs, parent_coins, child_coins, keys, positions, depth=depth,
        threshold_single=threshold_single, threshold_acc=threshold_acc,
    )
    triton_path = select_backend(candidates, requested=backend) == "triton"
    return sample_tree(inputs, triton_path, block_v, compiled=_compiled_cpu(backend))


def sample_tree(
    inputs: TreeSamplingInputs, triton_path: bool, block_v: int | None, compiled: bool = False
) -> TreeVerifyResult:
    """Tree sampling of validated `inputs` on the Triton kernel (`triton_path`), compiled for
    the CPU (`compiled`: the backend was chosen automatically; taken where numba imports and
    `numba_impl.supports(inputs)`) or in torch."""
    if triton_path:
        from specreg.kernels.tree_verify_sampling.triton_impl import verify_tree_sampling_triton

        return verify_tree_sampling_triton(inputs, block_v=block_v)
    if compiled and numba_supports(inputs) and numba_available():
        return verify_tree_sampling_numba(inputs)
    return verify_tree_sampling_torch(inputs)


def _compiled_cpu(backend: str | None) -> bool:
    """Whether the backend was chosen automatically ('auto', or None with
    SPECREG_KERNEL_BACKEND unset or 'auto'; an explicit 'torch' keeps the torch path)."""
    return (requested_backend() if backend is None else backend) == "auto"
