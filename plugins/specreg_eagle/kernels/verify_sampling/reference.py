"""The plain per-request rule of tree sampling (test oracle): walk each tree in Python, float64.

Per parent node P (fresh whenever a child is accepted), children tried in sibling order:
- target-only (no q, or P's q row all zero): accept child c when
  `coins[P] < (p(c_1) + ... + p(c)) / threshold_acc` or `p(c) >= threshold_single`, a token
  already tried at P counting 0; the final token is drawn from p without the tried tokens.
- recursive rejection sampling (P's q row has mass): with the residual target r (r = p at
  first) and the draft q without the tokens tried before, accept c when
  `coins[c - 1] * q(c) / sum(q) < r(c) / sum(r)`; on rejection
  `r = max(r / sum(r) - q / sum(q), 0)` and c leaves q. The final token is drawn from r.
- the final draw (coin `final_coins`) is by inverse CDF: the first token with positive weight
  whose cumulative weight exceeds `coin * total`; a residual without mass falls back to p.
The walk stops at a node no child of which is accepted, after `depth` accepted drafts, or after
N - 1 node visits. Residuals are kept as whole rows (no sparse coefficients).
`verify_tree_with_params_reference` adds the per-request parameters: greedy requests walk on
the raw argmax, the others on the filtered rows of `specreg.kernels.filtering.reference`.
"""

from __future__ import annotations

import torch

from specreg.kernels.argmax.reference import row_argmax_reference
from specreg.kernels.filtering.reference import filtered_distribution
from specreg.kernels.filtering.types import DEFAULT_FILTER_ORDER, FilterOrder
from specreg.sampling_params import SamplingParams
from specreg_eagle.kernels.verify_greedy.reference import greedy_walk, path_result
from specreg_eagle.kernels.verify_greedy.types import TreeVerifyResult
from specreg_eagle.kernels.verify_sampling.types import TreeSamplingInputs


def _inverse_cdf(weights: list[float], coin: float) -> int:
    target = coin * sum(weights)
    running, last_positive = 0.0, 0
    for token, weight in enumerate(weights):
        running += weight
        if weight > 0:
            if running > target:
                return token
            last_positive = token
    return last_positive


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

    def final(self, coin: float) -> int:
        if self.rejection:
            weights = self.residual
        else:
            weights = [0.0 if v in self.tried else w for v, w in enumerate(self.p)]
        if not sum(weights) > 0:
            weights = self.p
        return _inverse_cdf(weights, coin)


def sampling_walk(
    tokens: list[int],
    first: list[int],
    sibling: list[int],
    p_rows: list[list[float]],
    q_rows: list[list[float]] | None,
    coins: list[float],
    final_coin: float,
    *,
    depth: int,
    thresholds: tuple[float, float] = (1.0, 1.0),
) -> tuple[list[int], int]:
    """One request's (accepted local path, final token)."""
    def parent(node: int) -> _Parent:
        return _Parent(p_rows[node], q_rows[node] if q_rows is not None else None, coins[node])

    path, state, child = [0], parent(0), first[0]
    for _ in range(len(tokens) - 1):
        if child < 0 or len(path) - 1 >= depth:
            break
        token = tokens[child]
        assert 0 <= token < len(p_rows[0]), "candidates outside the vocabulary"
        if state.accepts(token, coins[child - 1], thresholds):
            path.append(child)
            state, child = parent(child), first[child]
        else:
            child = sibling[child]
    return path, state.final(final_coin)


def _rows(tensor: torch.Tensor | None, r: int) -> list[list[float]] | None:
    return None if tensor is None else tensor[r].to(torch.float64).tolist()


def verify_tree_sampling_reference(inputs: TreeSamplingInputs) -> TreeVerifyResult:
    """Tree sampling of `inputs` (same outputs as `verify_tree_sampling` given its coins)."""
    x = inputs
    walks = [
        sampling_walk(
            x.candidates[r].tolist(), x.next_token[r].tolist(), x.next_sibling[r].tolist(),
            _rows(x.target_probs, r), _rows(x.draft_probs, r),
            x.coins[r].to(torch.float64).tolist(), float(x.final_coins[r]), depth=x.depth,
            thresholds=(x.threshold_single, x.threshold_acc),
        )
        for r in range(x.candidates.shape[0])
    ]
    return path_result(x.candidates, x.retrieve_index, walks, x.depth)


def verify_tree_with_params_reference(
    candidates: torch.Tensor,
    retrieve_index: torch.Tensor,
    next_token: torch.Tensor,
    next_sibling: torch.Tensor,
    target: torch.Tensor,
    *,
    depth: int,
    params: SamplingParams,
    coins: torch.Tensor,
    draft: torch.Tensor | None = None,
    probabilities: bool = False,
    thresholds: tuple[float, float] = (1.0, 1.0),
    filter_order: FilterOrder = DEFAULT_FILTER_ORDER,
) -> TreeVerifyResult:
    """`verify_tree_with_params` given the coins [b, N + 1] (`request_coins`: columns 0..N-1
    the node coins, column N the final draw). Requests with invalid parameters emit -1."""
    b, n, vocab = target.shape
    invalid = params.invalid_rows(vocab).tolist()
    walks: list[tuple[list[int], int] | None] = []
    for r in range(b):
        links = (candidates[r].tolist(), next_token[r].tolist(), next_sibling[r].tolist())
        temperature = float(params.temperature[r])
        if invalid[r]:
            walks.append(None)
            continue
        if temperature == 0:
            predict = row_argmax_reference(target[r]).tolist()
            walks.append(greedy_walk(*links, predict, depth))
            continue
        rule = dict(temperature=temperature, top_k=int(params.top_k[r]),
                    top_p=float(params.top_p[r]), min_p=float(params.min_p[r]),
                    probabilities=probabilities, order=filter_order)
        p_rows = [filtered_distribution(target[r, i], **rule).tolist() for i in range(n)]
        q_rows = None if draft is None else [
            filtered_distribution(draft[r, i], **rule).tolist() for i in range(n)
        ]
        row_coins = coins[r].to(torch.float64).tolist()
        walks.append(sampling_walk(*links, p_rows, q_rows, row_coins[:n], row_coins[n],
                                   depth=depth, thresholds=thresholds))
    result = path_result(candidates, retrieve_index, walks, depth)
    return TreeVerifyResult(
        predicts=result.predicts, accept_index=result.accept_index,
        accept_token_num=result.accept_token_num, bonus=result.bonus,
        output_tokens=result.output_tokens, param_error=torch.tensor(invalid, dtype=torch.bool),
    )
