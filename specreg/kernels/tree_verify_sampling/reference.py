"""The plain per-request rule of tree sampling (test oracle): walk each tree in Python, float64.

Per parent node P (fresh whenever a child is accepted), children tried in sibling order:
- target-only (no q, or P's q row all zero): accept child c when
  `coins[P] < (p(c_1) + ... + p(c)) / threshold_acc` or `p(c) >= threshold_single`, a token
  already tried at P counting 0; the final token is drawn from p without the tried tokens.
- recursive rejection sampling (P's q row has mass): with the residual target r (r = p at
  first) and the draft q without the tokens tried before, accept c when
  `child_coins[c] * q(c) / sum(q) < r(c) / sum(r)`; on rejection
  `r = max(r / sum(r) - q / sum(q), 0)` and c leaves q. The final token is drawn from r.
- the final draw is the two-level race on the random stream (`block_race_reference`) keyed by
  (request key, RESIDUAL role, positions + depth of the last accepted node), tried child or
  not: a tree drafter's SAMPLE-role draws at that position may have shaped the tree; a residual
  without mass falls back to p.
The walk stops at a node no child of which is accepted, after `depth` accepted drafts, or after
N - 1 node visits. Residuals are kept as whole rows (no sparse coefficients).
The coins' own oracle is `specreg.kernels.tree_coins.reference`; the per-request parameters'
is `specreg.kernels.tree_verify_params.reference`.
"""

from __future__ import annotations

import torch

from specreg.kernels.random_stream.reference import draw_lanes
from specreg.kernels.random_stream.types import RESIDUAL_ROLE
from specreg.kernels.tree_residual_draw.reference import final_token_reference
from specreg.kernels.tree_verify_greedy.reference import path_result
from specreg.kernels.tree_verify_greedy.types import TreeVerifyResult
from specreg.kernels.tree_verify_sampling.types import TreeSamplingInputs


class _Parent:
    """The state of one parent node while its children are tried."""

    def __init__(self, p: list[float], q: list[float] | None, coin: float) -> None:
        self.p, self.coin = p, coin
        self.rejection = q is not None and sum(q) > 0
        self.q = list(q) if self.rejection else None
        self.residual = list(p)
        self.tried: list[int] = []
        self.tried_mass = 0.0

    def accepts(self, token: int, child_coin: float, thresholds: tuple[float, float]) -> bool:
        """Try child `token` (its own coin `child_coin`); record it when rejected."""
        seen = token in self.tried
        if self.rejection:
            assert self.q is not None
            p_mass, q_mass = sum(self.residual), sum(self.q)
            accepted = child_coin * self.q[token] * p_mass < self.residual[token] * q_mass
            if not accepted and q_mass > 0 and p_mass > 0:  # a residual without mass stays so
                self.residual = [max(r / p_mass - q / q_mass, 0.0)
                                 for r, q in zip(self.residual, self.q, strict=True)]
            if not accepted:
                self.q[token] = 0.0
        else:
            single, acc = thresholds
            p_token = 0.0 if seen else self.p[token]
            accepted = self.coin < (self.tried_mass + p_token) / acc or p_token >= single
            if not accepted:
                self.tried_mass += p_token
        if not accepted and not seen:
            self.tried.append(token)
        return accepted

    def final(self, lanes: tuple[int, int]) -> int:
        if self.rejection:
            weights = self.residual
        else:
            weights = [0.0 if v in self.tried else w for v, w in enumerate(self.p)]
        return final_token_reference(weights, self.p, lanes)


def sampling_walk(
    tokens: list[int],
    first: list[int],
    sibling: list[int],
    p_rows: list[list[float]],
    q_rows: list[list[float]] | None,
    coins: list[float],
    child_coins: list[float],
    key: int,
    position: int,
    *,
    depth: int,
    thresholds: tuple[float, float] = (1.0, 1.0),
) -> tuple[list[int], int]:
    """One request's (accepted local path, final token): `coins[P]` the target-only coin of
    parent P, `child_coins[c]` the coin child c is tested with under recursive rejection;
    the final race keyed by (`key`, role, `position` + accepted drafts)."""
    def parent(node: int) -> _Parent:
        return _Parent(p_rows[node], q_rows[node] if q_rows is not None else None, coins[node])

    path, state, child = [0], parent(0), first[0]
    for _ in range(len(tokens) - 1):
        if child < 0 or len(path) - 1 >= depth:
            break
        token = tokens[child]
        assert 0 <= token < len(p_rows[0]), "candidates outside the vocabulary"
        if state.accepts(token, child_coins[child], thresholds):
            path.append(child)
            state, child = parent(child), first[child]
        else:
            child = sibling[child]
    # always the RESIDUAL role: the drafter's SAMPLE-role draws at this position may have
    # shaped the tree (`torch_impl.final_lanes`)
    return path, state.final(draw_lanes(key, RESIDUAL_ROLE, position + len(path) - 1))


def _rows(tensor: torch.Tensor | None, r: int) -> list[list[float]] | None:
    return None if tensor is None else tensor[r].to(torch.float64).tolist()


def verify_tree_sampling_reference(inputs: TreeSamplingInputs) -> TreeVerifyResult:
    """Tree sampling of `inputs` (same outputs as `verify_tree_sampling` given its coins,
    keys and positions)."""
    x = inputs
    walks = [
        sampling_walk(
            x.candidates[r].tolist(), x.next_token[r].tolist(), x.next_sibling[r].tolist(),
            _rows(x.target_probs, r), _rows(x.draft_probs, r),
            x.coins[r].to(torch.float64).tolist(), x.child_coins[r].to(torch.float64).tolist(),
            int(x.keys[r]), int(x.positions[r]), depth=x.depth,
            thresholds=(x.threshold_single, x.threshold_acc),
        )
        for r in range(x.candidates.shape[0])
    ]
    return path_result(x.candidates, x.retrieve_index, walks, x.depth)
