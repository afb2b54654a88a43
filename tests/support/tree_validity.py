"""An independent validity predicate for the EAGLE tree kernels' inputs, for the fuzz targets.

Written from the documented contracts (the `verify_greedy`, `verify_sampling` and `tree_build`
module and function docstrings, the CPU value checks they promise), not from the kernels'
checks: every input is read as plain Python numbers and the predicate lists what is wrong. A
fuzz target asserts that every coded refusal comes with a non-empty list (the refusal was
justified) and that every input accepted on the CPU, where value checks are on, has an empty
one (`tests.support.chain_validity.acceptance_is_justified`: only the float32-overflow
ambiguity may remain).

The contracts, as documented:
- Tree links (`verify_tree_greedy`, `verify_tree_sampling`): `candidates`, `retrieve_index`,
  `retrieve_next_token`, `retrieve_next_sibling` int32/int64 [b, N], N >= 1; tokens in [0, V)
  when V is known; rows in [0, b * N); links in [1, N) or -1; `depth` an int >= 1.
- Greedy: exactly one of `target_logits` (float [b, N, V], V >= 1, no NaN) and `target_predict`
  (int [b, N]).
- Sampling: `target_probs` float [b, N, V], V >= 1, finite, >= 0, every row with mass;
  `draft_probs` the same shape, finite, >= 0 (all-zero rows allowed: the target-only rule);
  `keys` / `positions` int [b], positions >= 0; `coins` float [b, N] in [0, 1); thresholds in
  (0, 1].
- Tree build: `bonus_tokens` [b], `parent_list` [b, K (S - 1) + 1] ([b, 0] for S = 1),
  `top_scores_index` and `draft_tokens` [b, N - 1], `seq_lens` [b], all int32/int64; topk,
  depth, num_verify_tokens ints >= 1; mask_mode one of full / qlen_only /
  qlen_only_bitpacking (N <= 32 for the last); draft ids in [0, K + K^2 (S - 1)), parents in
  [-1, that), seq_lens >= 0; and every node reaches the root within `depth` steps up its kept
  parents (a draft id's slot id // K is the root for slot 0, else the kept draft whose id is
  `parent_list[slot]`).
"""

from __future__ import annotations

import math

import torch

from tests.support.chain_validity import AMBIGUOUS, FLOATS, INDEX

_F32_MAX = 3.4028234663852886e38
MASK_MODES = ("full", "qlen_only", "qlen_only_bitpacking")
MAX_BITPACKED_NODES = 32


def _is_int(value, low: int) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and value >= low


def _tensor(name, value, shape, dtypes, problems):
    """`value` when it is a tensor of `shape` (None = any size) and one of `dtypes`."""
    if not isinstance(value, torch.Tensor):
        problems.append(f"{name} is not a tensor")
        return None
    if value.dim() != len(shape) or any(
        want is not None and got != want for got, want in zip(value.shape, shape, strict=True)
    ):
        problems.append(f"{name} has shape {tuple(value.shape)}, wants {shape}")
        return None
    if value.dtype not in dtypes:
        problems.append(f"{name} has dtype {value.dtype}")
        return None
    return value


def _values(t: torch.Tensor) -> list:
    return t.detach().to("cpu", torch.float64).flatten().tolist()


def _devices(tensors, problems) -> None:
    devices = {t.device for t in tensors if t is not None}
    if len(devices) > 1:
        problems.append("inputs on several devices")
    if any(d.type == "meta" for d in devices):
        problems.append("meta tensors hold no values")


def _links(candidates, retrieve_index, next_token, next_sibling, depth, problems):
    """(b, N, the four link tensors) or None when their shapes already fail."""
    if not _is_int(depth, 1):
        problems.append(f"depth={depth!r} is not an int >= 1")
    c = _tensor("candidates", candidates, (None, None), INDEX, problems)
    if c is None:
        return None
    b, n = c.shape
    if n < 1:
        problems.append("no root column")
    rest = [
        _tensor(name, value, (b, n), INDEX, problems)
        for name, value in (("retrieve_index", retrieve_index), ("next_token", next_token),
                            ("next_sibling", next_sibling))
    ]  # fmt: skip
    return b, n, [c, *rest]


def _link_values(links, b, n, vocab, problems) -> None:
    c, rows, nxt, sib = links
    if vocab is not None and any(not 0 <= x < vocab for x in c.flatten().tolist()):
        problems.append("a candidate token outside [0, V)")
    if any(not 0 <= x < b * n for x in rows.flatten().tolist()):
        problems.append("retrieve_index outside [0, b * N)")
    for name, t in (("next_token", nxt), ("next_sibling", sib)):
        if any(not (x == -1 or 1 <= x < n) for x in t.flatten().tolist()):
            problems.append(f"{name} outside [1, N) and not -1")


def _probability_rows(name, t, vocab, zero_rows_allowed, problems) -> None:
    values = _values(t)
    for start in range(0, len(values), vocab):
        row = values[start : start + vocab]
        if any(math.isnan(x) or math.isinf(x) or x < 0 for x in row):
            problems.append(f"{name} has a NaN, infinite or negative value")
            return
        total = math.fsum(row)
        if total > _F32_MAX:
            problems.append(f"{name} has a row summing past float32")
            return
        if total > _F32_MAX / 4:
            problems.append(AMBIGUOUS)
        elif total <= 0 and not zero_rows_allowed:
            problems.append(f"{name} has a row without mass")
            return


def tree_greedy_problems(candidates, retrieve_index, next_token, next_sibling, *, depth,
                         target_logits=None, target_predict=None) -> list[str]:
    """What is wrong with a `verify_tree_greedy` call's inputs, on the CPU."""
    problems: list[str] = []
    found = _links(candidates, retrieve_index, next_token, next_sibling, depth, problems)
    if found is None:
        return problems
    b, n, links = found
    if (target_logits is None) == (target_predict is None):
        return problems + ["give exactly one of target_logits and target_predict"]
    vocab, target = None, None
    if target_logits is not None:
        target = _tensor("target_logits", target_logits, (b, n, None), FLOATS, problems)
        if target is not None:
            vocab = target.shape[2]
            if vocab < 1:
                problems.append("empty vocab")
    else:
        target = _tensor("target_predict", target_predict, (b, n), INDEX, problems)
    if problems or any(t is None for t in links):
        return problems or ["missing"]
    _devices([*links, target], problems)
    if problems:
        return problems
    _link_values(links, b, n, vocab, problems)
    if target_logits is not None and any(math.isnan(x) for x in _values(target)):
        problems.append("NaN logits")
    return problems


def tree_sampling_problems(candidates, retrieve_index, next_token, next_sibling, target_probs,
                           *, depth, draft_probs=None, keys=None, positions=None, coins=None,
                           threshold_single=1.0, threshold_acc=1.0) -> list[str]:
    """What is wrong with a `verify_tree_sampling` call's inputs, on the CPU."""
    problems: list[str] = []
    found = _links(candidates, retrieve_index, next_token, next_sibling, depth, problems)
    if found is None:
        return problems
    b, n, links = found
    p = _tensor("target_probs", target_probs, (b, n, None), FLOATS, problems)
    vocab = None if p is None else p.shape[2]
    if vocab is not None and vocab < 1:
        problems.append("empty vocab")
    q = None if draft_probs is None or vocab is None else _tensor(
        "draft_probs", draft_probs, (b, n, vocab), FLOATS, problems)
    u = None if coins is None else _tensor("coins", coins, (b, n), FLOATS, problems)
    k = None if keys is None else _tensor("keys", keys, (b,), INDEX, problems)
    pos = None if positions is None else _tensor("positions", positions, (b,), INDEX, problems)
    for name, value in (("threshold_single", threshold_single), ("threshold_acc", threshold_acc)):
        if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value <= 1:
            problems.append(f"{name} outside (0, 1]")
    if problems or p is None or any(t is None for t in links):
        return problems or ["missing"]
    _devices([*links, p, q, u, k, pos], problems)
    if problems:
        return problems
    _link_values(links, b, n, vocab, problems)
    _probability_rows("target_probs", p, vocab, False, problems)
    if q is not None:
        _probability_rows("draft_probs", q, vocab, True, problems)
    if u is not None and any(not 0 <= x < 1 for x in _values(u)):
        problems.append("coins outside [0, 1)")
    if pos is not None and any(x < 0 for x in pos.tolist()):
        problems.append("negative positions")
    return problems


def _reaches_root(selected: list[int], parent_ids: list[int], topk: int, depth: int) -> bool:
    """Every node of one request walks up its kept parents to the root within `depth` steps."""
    parent_of = []
    for global_id in selected:
        slot = global_id // topk
        if slot == 0:
            parent_of.append(0)
        elif slot < len(parent_ids) and parent_ids[slot] in selected:
            parent_of.append(1 + selected.index(parent_ids[slot]))
        else:
            return False
    for node in range(1, len(selected) + 1):
        steps, current = 0, node
        while current != 0 and steps < depth:
            current, steps = parent_of[current - 1], steps + 1
        if current != 0:
            return False
    return True


def build_tree_problems(bonus_tokens, parent_list, top_scores_index, draft_tokens, seq_lens, *,
                        topk, depth, num_verify_tokens, mask_mode="full") -> list[str]:
    """What is wrong with a `build_tree` call's inputs, on the CPU."""
    problems: list[str] = []
    if mask_mode not in MASK_MODES:
        problems.append(f"mask_mode {mask_mode!r}")
    for name, value in (("topk", topk), ("depth", depth), ("num_verify_tokens", num_verify_tokens)):
        if not _is_int(value, 1):
            problems.append(f"{name}={value!r} is not an int >= 1")
    if problems:
        return problems
    n = num_verify_tokens
    if mask_mode == "qlen_only_bitpacking" and n > MAX_BITPACKED_NODES:
        problems.append("too many nodes for a 32-bit packed mask row")
    bonus = _tensor("bonus_tokens", bonus_tokens, (None,), INDEX, problems)
    if bonus is None:
        return problems
    b = bonus.shape[0]
    width = topk * (depth - 1) + 1 if depth > 1 else 0
    tensors = [
        _tensor("parent_list", parent_list, (b, width), INDEX, problems),
        _tensor("top_scores_index", top_scores_index, (b, n - 1), INDEX, problems),
        _tensor("draft_tokens", draft_tokens, (b, n - 1), INDEX, problems),
        _tensor("seq_lens", seq_lens, (b,), INDEX, problems),
    ]
    if problems:
        return problems
    _devices([bonus, *tensors], problems)
    if problems:
        return problems
    parents, selected, _, lens = (t.tolist() for t in tensors)
    ids = topk + topk * topk * (depth - 1)
    if any(not 0 <= x < ids for row in selected for x in row):
        problems.append("a draft id outside [0, K + K^2 (S - 1))")
    if any(not -1 <= x < ids for row in parents for x in row):
        problems.append("a parent id outside [-1, K + K^2 (S - 1))")
    if any(x < 0 for x in lens):
        problems.append("negative seq_lens")
    if problems:
        return problems
    for r in range(b):
        if not _reaches_root(selected[r], parents[r], topk, depth):
            problems.append(f"request {r}: a node does not reach the root within depth")
    return problems
