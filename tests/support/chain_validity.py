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

import dataclasses
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


@dataclasses.dataclass(frozen=True)
class RowProblem:
    """One row's problem (`chain_problems(..., rows=...)` lists them): `tensor` 'target' or
    'draft', request `i`, row `j`, the `text` chain_problems lists, and `columns`, the columns
    holding a NaN, infinite or negative value (empty for a sum or mass problem)."""

    tensor: str
    i: int
    j: int
    text: str
    columns: frozenset[int] = frozenset()


def _probability_problems(name, rows, must_have_mass, problems, records=None):
    """Finite, >= 0 everywhere; positive mass where `must_have_mass(i, j)`. `rows` [b][n][V].
    Each problem found is also recorded as a `RowProblem` in `records` when given."""
    for i, request in enumerate(rows):
        for j, row in enumerate(request):
            bad = frozenset(c for c, x in enumerate(row) if math.isnan(x) or math.isinf(x) or x < 0)
            if bad:
                text = f"{name}[{i}, {j}] has a NaN, infinite or negative value"
            else:
                total = math.fsum(row)
                if total > _F32_MAX:
                    text = f"{name}[{i}, {j}] sums past float32"
                elif total > _F32_MAX / 4:
                    text = AMBIGUOUS
                elif must_have_mass(i, j) and total <= 0:
                    text = f"{name}[{i}, {j}] has no mass at a verified position"
                else:
                    continue
            problems.append(text)
            if records is not None:
                records.append(RowProblem(name, i, j, text, bad))


def chain_problems(
    candidates, target, draft=None, *, verify_lens=None, coins=None, keys=None, positions=None,
    probabilities: bool, target_only: bool = False, rows: list[RowProblem] | None = None,
) -> list[str]:
    """What is wrong with a chain verify call's inputs, on the CPU (every value checked:
    check_values=True). The problems of the probability rows are also listed, with where they
    lie, in `rows` when given (`read_split` tells those the rule reads from the others)."""
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
        for i, request in enumerate(_rows(t)):
            for j, row in enumerate(request):
                bad = frozenset(c for c, x in enumerate(row) if math.isnan(x))
                if bad:
                    problems.append(f"target[{i}, {j}] holds NaN logits")
                    if rows is not None:
                        rows.append(RowProblem("target", i, j, problems[-1], bad))
        return problems
    _probability_problems("target", _rows(t), lambda i, j: j < limits[i], problems, rows)
    if q is not None and not target_only:
        _probability_problems("draft", _rows(q), lambda i, j: j + 1 < limits[i], problems, rows)
    return problems


def read_split(
    rows: list[RowProblem], candidates, draft, accept_len, *, verify_lens=None,
    rule: str = "classic",
) -> tuple[list[RowProblem], list[RowProblem]]:
    """(read, unread): the row problems lying in what the rule reads, given each request's
    `accept_len` (from the documented rules, `specreg.kernels.chain`), and the others.

    What the rule reads, request r with verify length L (n without verify_lens) stopping at
    row a = accept_len[r]:
    - `rule` 'classic' and 'target_only': p(x) and q(x) of every verified draft (x =
      candidates[r, j + 1], j <= L - 2), the whole p row a (the bonus or the correction is drawn
      from it), the whole q row a after a rejection (a < L - 1: the residual), and the whole q
      row of a verified draft with q(x) = 0 (its mass tells an all-zero q row);
    - 'invariant' (the drafter-invariant rule) and 'greedy': the whole target rows 0..a (each
      one's token is drawn, or its argmax taken).
    A problem lies in what the rule reads when its row is read whole, or when one of its
    invalid values is the drafted token's."""
    b, n = candidates.shape
    limits = [n] * b if verify_lens is None else [int(x) for x in verify_lens.tolist()]
    tokens = candidates.tolist()
    q = None if draft is None else _rows(draft)
    whole_rows = rule in ("invariant", "greedy")
    read, unread = [], []
    for problem in rows:
        i, j = problem.i, problem.j
        a, limit = int(accept_len[i]), limits[i]
        drafted = j <= limit - 2  # row j's drafted token is verified
        x = tokens[i][j + 1] if drafted else None
        if problem.tensor == "target":
            whole = j <= a if whole_rows else j == a
        else:
            whole = (j == a and a < limit - 1) or (drafted and q[i][j][x] == 0)
        at_token = drafted and not whole_rows and x in problem.columns
        (read if whole or at_token else unread).append(problem)
    return read, unread


def refusal_is_justified(problems: list[str]) -> bool:
    return bool(problems)


def acceptance_is_justified(problems: list[str]) -> bool:
    return not problems or problems == [AMBIGUOUS] * len(problems)
