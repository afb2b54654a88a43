"""An independent validity predicate for the chain verifiers' inputs, for the fuzz targets.

Written from the documented contract (`specreg.kernels.chain` module docstring, the CPU value
checks it promises), not from the kernels' checks: it reads every input as plain Python /
float64 numbers and lists what is wrong. A fuzz target asserts that every coded refusal comes
with a non-empty list (the refusal was justified) and that every accepted input on the CPU,
where value checks are on, has an empty one (nothing invalid slipped through).

`AMBIGUOUS` marks the one place where float rounding decides: a row of finite values whose
float32 sum lies near float32's largest value may overflow in one summation order and not in
another, so either verdict is accepted there.
"""

from __future__ import annotations

import math

import torch

INDEX = (torch.int32, torch.int64)
FLOATS = (torch.float16, torch.bfloat16, torch.float32, torch.float64)
AMBIGUOUS = "float32 row sum near overflow"
_F32_MAX = 3.4028234663852886e38


def _tensor(name, value, dims, dtypes, problems):
    if not isinstance(value, torch.Tensor):
        problems.append(f"{name} is not a tensor")
        return None
    if value.dim() != dims:
        problems.append(f"{name} has {value.dim()} dims, wants {dims}")
        return None
    if value.dtype not in dtypes:
        problems.append(f"{name} has dtype {value.dtype}")
        return None
    return value


def _rows(t):
    """The tensor as nested Python lists of float64 (rounded values of its own dtype)."""
    return t.detach().to("cpu", torch.float64).tolist()


def _probability_problems(name, rows, must_have_mass, problems):
    """Finite, >= 0 everywhere; positive mass where `must_have_mass(i, j)`. `rows` [b][n][V]."""
    for i, request in enumerate(rows):
        for j, row in enumerate(request):
            if any(math.isnan(x) or math.isinf(x) or x < 0 for x in row):
                problems.append(f"{name}[{i}, {j}] has a NaN, infinite or negative value")
                continue
            total = math.fsum(row)
            if total > _F32_MAX:
                problems.append(f"{name}[{i}, {j}] sums past float32")
            elif total > _F32_MAX / 4:
                problems.append(AMBIGUOUS)
            elif must_have_mass(i, j) and total <= 0:
                problems.append(f"{name}[{i}, {j}] has no mass at a verified position")


def chain_problems(
    candidates, target, draft=None, *, verify_lens=None, coins=None, keys=None, positions=None,
    probabilities: bool, target_only: bool = False,
) -> list[str]:
    """What is wrong with a chain verify call's inputs, on the CPU (value checks on)."""
    problems: list[str] = []
    c = _tensor("candidates", candidates, 2, INDEX, problems)
    t = _tensor("target", target, 3, FLOATS, problems)
    q = None if draft is None else _tensor("draft", draft, 3, FLOATS, problems)
    lens = None if verify_lens is None else _tensor("verify_lens", verify_lens, 1, INDEX, problems)
    u = None if coins is None else _tensor("coins", coins, 2, FLOATS, problems)
    k = None if keys is None else _tensor("keys", keys, 1, INDEX, problems)
    pos = None if positions is None else _tensor("positions", positions, 1, INDEX, problems)
    if problems or c is None or t is None:
        return problems or ["missing"]
    b, n = c.shape
    if n < 1:
        problems.append("no anchor column")
    if tuple(t.shape[:2]) != (b, n) or t.shape[2] < 1:
        problems.append(f"target shape {tuple(t.shape)} for candidates {tuple(c.shape)}")
    vocab = t.shape[2]
    if q is not None and tuple(q.shape) != (b, n - 1, vocab):
        problems.append(f"draft shape {tuple(q.shape)}")
    if lens is not None and tuple(lens.shape) != (b,):
        problems.append("verify_lens shape")
    if u is not None and (u.shape[0] != b or u.shape[1] < n - 1):
        problems.append("coins shape")
    for name, vector in (("keys", k), ("positions", pos)):
        if vector is not None and tuple(vector.shape) != (b,):
            problems.append(f"{name} shape")
    present = [x for x in (c, t, q, lens, u, k, pos) if x is not None]
    devices = {x.device for x in present}
    if len(devices) > 1:
        problems.append("inputs on several devices")
    if any(d.type == "meta" for d in devices):
        problems.append("meta tensors hold no values")
    if problems:
        return problems
    limits = [n] * b if lens is None else [int(x) for x in lens.tolist()]
    if any(not 1 <= x <= n for x in limits):
        return ["verify_lens outside [1, n]"]
    tokens = c.tolist()
    for i in range(b):
        for j in range(limits[i]):
            if not 0 <= tokens[i][j] < vocab:
                problems.append(f"candidates[{i}, {j}] outside [0, V) at a verified position")
    if u is not None and any(not 0 <= x < 1 for row in _rows(u) for x in row):
        problems.append("coins outside [0, 1)")
    if pos is not None and any(x < 0 for x in pos.tolist()):
        problems.append("negative positions")
    if not probabilities:
        if any(math.isnan(x) for request in _rows(t) for row in request for x in row):
            problems.append("NaN logits")
        return problems
    _probability_problems("target", _rows(t), lambda i, j: j < limits[i], problems)
    if q is not None and not target_only:
        _probability_problems("draft", _rows(q), lambda i, j: j + 1 < limits[i], problems)
    return problems


def refusal_is_justified(problems: list[str]) -> bool:
    return bool(problems)


def acceptance_is_justified(problems: list[str]) -> bool:
    return not problems or problems == [AMBIGUOUS] * len(problems)
