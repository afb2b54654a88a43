"""Single-point mutants of a Python module, generated from its AST (one change per mutant).

Operators (each applied at one site): comparison flips (< <=, > >=, == !=, is / is not),
arithmetic swaps (+ -, * /, // *, & |), `and` / `or`, dropped `not` and unary minus, integer
constants (0 -> 1, 1 -> 0, n -> n + 1), booleans, float constants (0.0 -> 1.0, x -> 2x),
paired method and function names (clamp_min / clamp_max, amax / amin, maximum / minimum, ...)
and the deletion of a statement that is a bare call (an in-place op such as ``x.sort()``).
Docstrings, strings, the bodies of ``raise`` statements and lines ending in
``# pragma: no mutate`` are left alone.
"""

from __future__ import annotations

import ast
import copy
from collections.abc import Iterator

import attrs

COMPARE_FLIPS = {
    ast.Lt: ast.LtE, ast.LtE: ast.Lt, ast.Gt: ast.GtE, ast.GtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}  # fmt: skip
BINOP_SWAPS = {
    ast.Add: ast.Sub, ast.Sub: ast.Add, ast.Mult: ast.Div, ast.Div: ast.Mult,
    ast.FloorDiv: ast.Mult, ast.BitAnd: ast.BitOr, ast.BitOr: ast.BitAnd,
    ast.LShift: ast.RShift, ast.Mod: ast.FloorDiv,
}  # fmt: skip
NAME_PAIRS = {
    "clamp_min": "clamp_max", "clamp_max": "clamp_min", "amax": "amin", "amin": "amax",
    "maximum": "minimum", "minimum": "maximum", "max": "min", "min": "max",
    "argmax": "argmin", "cumsum": "cumprod", "floor": "ceil", "ceil": "floor",
    "any": "all", "all": "any",
}  # fmt: skip
SYMBOL = {
    ast.Lt: "<", ast.LtE: "<=", ast.Gt: ">", ast.GtE: ">=", ast.Eq: "==", ast.NotEq: "!=",
    ast.Is: "is", ast.IsNot: "is not", ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/",
    ast.FloorDiv: "//", ast.BitAnd: "&", ast.BitOr: "|", ast.LShift: "<<", ast.RShift: ">>",
    ast.Mod: "%",
}  # fmt: skip


@attrs.frozen
class Mutant:
    """One mutant: `key` (stable: module:line:col:operator, then .2, .3 for the nested operators
    that start at the same column), what changed, the mutated source."""

    key: str
    line: int
    description: str
    source: str


def _protected_lines(tree: ast.Module, text: str) -> set[int]:
    """Lines of docstrings, raise statements and `# pragma: no mutate` lines."""
    lines: set[int] = set()
    for number, line in enumerate(text.splitlines(), start=1):
        if line.rstrip().endswith("# pragma: no mutate"):
            lines.add(number)
    for node in ast.walk(tree):
        if isinstance(node, ast.Raise) or (
            isinstance(node, ast.Expr) and isinstance(node.value, ast.Constant)
        ):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
        if isinstance(node, ast.If) and "TYPE_CHECKING" in ast.unparse(node.test):
            lines.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return lines


def _int_change(value: int) -> int:
    return {0: 1, 1: 0}.get(value, value + 1)


def _edits(node: ast.AST, in_value: bool) -> Iterator[tuple[str, str, object]]:
    """(operator name, description, edit payload) for every mutation of one node; constants
    only where `in_value` (an operand of a comparison or arithmetic, a bound or a fill value:
    not a dim or an index, whose mutants crash on the first call and test nothing)."""
    if isinstance(node, ast.Compare):
        for i, op in enumerate(node.ops):
            if type(op) in COMPARE_FLIPS:
                new = COMPARE_FLIPS[type(op)]
                yield f"cmp{i}", f"{SYMBOL[type(op)]} -> {SYMBOL[new]}", (i, new)
    elif isinstance(node, (ast.BinOp, ast.AugAssign)) and type(node.op) in BINOP_SWAPS:
        new = BINOP_SWAPS[type(node.op)]
        yield "binop", f"{SYMBOL[type(node.op)]} -> {SYMBOL[new]}", new
    elif isinstance(node, ast.BoolOp):
        yield "boolop", "and -> or" if isinstance(node.op, ast.And) else "or -> and", None
    elif isinstance(node, ast.UnaryOp) and isinstance(node.op, (ast.Not, ast.Invert)):
        yield "unary", f"drop {type(node.op).__name__.lower()}", None
    elif isinstance(node, ast.Constant) and type(node.value) in (int, float, bool) and in_value:
        value = node.value
        if isinstance(value, bool):
            yield "const", f"{value} -> {not value}", not value
        elif isinstance(value, int):
            yield "const", f"{value} -> {_int_change(value)}", _int_change(value)
        else:
            new = 1.0 if value == 0 else value * 2
            yield "const", f"{value} -> {new}", new
    elif isinstance(node, ast.Attribute) and node.attr in NAME_PAIRS:
        yield "name", f".{node.attr} -> .{NAME_PAIRS[node.attr]}", NAME_PAIRS[node.attr]
    elif isinstance(node, ast.Name) and node.id in ("max", "min"):
        yield "name", f"{node.id} -> {NAME_PAIRS[node.id]}", NAME_PAIRS[node.id]
    elif isinstance(node, ast.Expr) and isinstance(node.value, ast.Call):
        yield "delete", "delete the statement", None


def _apply(node: ast.AST, operator: str, payload: object) -> ast.AST:
    if operator.startswith("cmp"):
        index, new = payload  # type: ignore[misc]
        node.ops[index] = new()
        return node
    if operator == "binop":
        node.op = payload()  # type: ignore[operator]
        return node
    if operator == "boolop":
        node.op = ast.Or() if isinstance(node.op, ast.And) else ast.And()
        return node
    if operator == "unary":
        return node.operand
    if operator == "const":
        node.value = payload
        return node
    if operator == "name":
        if isinstance(node, ast.Attribute):
            node.attr = payload  # type: ignore[assignment]
        else:
            node.id = payload  # type: ignore[assignment]
        return node
    return ast.Pass()  # delete


class _Replace(ast.NodeTransformer):
    def __init__(self, target: int, operator: str, payload: object) -> None:
        self.target, self.operator, self.payload, self.count = target, operator, payload, -1

    def generic_visit(self, node: ast.AST) -> ast.AST:
        self.count += 1
        if self.count == self.target:
            return _apply(node, self.operator, self.payload)
        return super().generic_visit(node)


def mutants(module: str, text: str) -> list[Mutant]:
    """Every single-point mutant of `text` (the source of `module`), in source order."""
    tree = ast.parse(text)
    protected = _protected_lines(tree, text)
    nodes: list[ast.AST] = []

    class _Number(ast.NodeVisitor):
        def generic_visit(self, node: ast.AST) -> None:
            nodes.append(node)
            super().generic_visit(node)

    _Number().visit(tree)
    annotations = {
        id(child)
        for parent in nodes
        if isinstance(parent, (ast.AnnAssign, ast.arg, ast.FunctionDef))
        for note in ([parent.returns] if isinstance(parent, ast.FunctionDef) else [parent.annotation])
        if note is not None
        for child in ast.walk(note)
    }
    values = _value_constants(nodes)
    out: list[Mutant] = []
    seen: dict[str, int] = {}
    for index, node in enumerate(nodes):
        line = getattr(node, "lineno", None)
        if line is None or line in protected:
            continue
        if id(node) in annotations:  # annotations are never executed
            continue
        for operator, description, payload in _edits(node, id(node) in values):
            changed = _Replace(index, operator, copy.deepcopy(payload)).visit(copy.deepcopy(tree))
            source = ast.unparse(ast.fix_missing_locations(changed))
            key = f"{module}:{line}:{node.col_offset}:{operator}"
            seen[key] = seen.get(key, 0) + 1
            if seen[key] > 1:  # nested operators starting at one column (a * b + c)
                key = f"{key}.{seen[key]}"
            out.append(Mutant(key=key, line=line, description=description, source=source))
    return out



#: Keywords whose constant is a value of the computation (a bound, a fill, a scale).
VALUE_KEYWORDS = {"min", "max", "alpha", "value", "fill_value", "other"}
#: Calls whose positional constants are values.
VALUE_CALLS = {"clamp", "clamp_min", "clamp_max", "clamp_", "full", "fill_", "masked_fill_",
               "masked_fill", "where", "maximum", "minimum", "max", "min", "range", "arange"}


def _value_constants(nodes: list[ast.AST]) -> set[int]:
    """ids of the numeric constants that are values (see `_edits`)."""
    found: set[int] = set()

    def add(expr: ast.AST) -> None:
        if isinstance(expr, ast.Constant):
            found.add(id(expr))
        elif isinstance(expr, ast.UnaryOp) and isinstance(expr.operand, ast.Constant):
            found.add(id(expr.operand))

    for node in nodes:
        if isinstance(node, ast.Compare):
            for operand in [node.left, *node.comparators]:
                add(operand)
        elif isinstance(node, ast.BinOp):
            add(node.left)
            add(node.right)
        elif isinstance(node, ast.AugAssign):
            add(node.value)
        elif isinstance(node, ast.Call):
            for keyword in node.keywords:
                if keyword.arg in VALUE_KEYWORDS:
                    add(keyword.value)
            func = node.func
            name = func.attr if isinstance(func, ast.Attribute) else getattr(func, "id", "")
            if name in VALUE_CALLS:
                for arg in node.args:
                    add(arg)
        elif isinstance(node, (ast.Assign, ast.Return)) and node.value is not None:
            add(node.value)
    return found
