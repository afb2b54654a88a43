"""Which tests run a mutant: a per-test line map of the mutated module, and in-place code swaps.

`LineMap` is a pytest plugin that records, for every test, the statements of the mutated module
it runs (probes put into a copy of the module's code, `probed`) and how long the test took. A mutant then
runs only the tests that execute its statement, fastest first: a test that never executes the
mutated statement runs exactly the same code with or without the mutant (the suite's hypothesis
tests are derandomized, so the map is stable). Mutants of module-level statements (constants,
class bodies, decorators) are run against every test of the module.

`swap_code` puts a mutant into the already imported module: it compiles the mutated source and
gives every function and method of the module the mutated code object (and defaults). Test
modules that imported a function by name hold the same function object, so they see the mutant
without being imported again: a forked child runs its tests without re-collecting them from disk.
"""

from __future__ import annotations

import ast
import time
import types

import pytest

HITS = "_MUTATION_HITS"


class _Probe(ast.NodeTransformer):
    """Puts `_MUTATION_HITS.add(line)` before every statement inside a function."""

    def __init__(self) -> None:
        self.depth = 0

    def _probe(self, body: list[ast.stmt]) -> list[ast.stmt]:
        out: list[ast.stmt] = []
        for stmt in body:
            call = ast.parse(f"{HITS}.add({stmt.lineno})").body[0]
            out += [ast.copy_location(call, stmt), self.visit(stmt)]
        return out

    def generic_visit(self, node: ast.AST) -> ast.AST:
        inside = isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
        self.depth += inside
        for field, value in ast.iter_fields(node):
            if isinstance(value, ast.AST):
                setattr(node, field, self.visit(value))
            elif isinstance(value, list) and value and isinstance(value[0], ast.stmt):
                probe = self.depth and field in ("body", "orelse", "finalbody")
                setattr(node, field, self._probe(value) if probe else
                        [self.visit(stmt) for stmt in value])  # fmt: skip
            elif isinstance(value, list):
                setattr(node, field, [self.visit(v) if isinstance(v, ast.AST) else v
                                      for v in value])  # fmt: skip
        self.depth -= inside
        return node


def probed(text: str) -> str:
    """`text` with a hit probe before each statement of its functions (`HITS` records lines)."""
    tree = _Probe().visit(ast.parse(text))
    return ast.unparse(ast.fix_missing_locations(tree))


class LineMap:
    """pytest plugin: `lines[nodeid]` (statements of the module each test ran, by first line,
    from the probes of `probed`) and `seconds[nodeid]`."""

    def __init__(self, module: types.ModuleType) -> None:
        self.module = module
        self.lines: dict[str, set[int]] = {}
        self.seconds: dict[str, float] = {}

    @pytest.hookimpl(hookwrapper=True)
    def pytest_runtest_protocol(self, item, nextitem):
        hits: set[int] = set()
        setattr(self.module, HITS, hits)
        start = time.perf_counter()
        yield
        self.seconds[item.nodeid] = time.perf_counter() - start
        self.lines[item.nodeid] = hits


def function_lines(text: str) -> set[int]:
    """Lines inside the bodies and signatures of functions and methods (not decorators): the
    mutants `swap_code` can apply in place; the rest are module-level."""
    inside: set[int] = set()
    for node in ast.walk(ast.parse(text)):
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            inside.update(range(node.lineno, (node.end_lineno or node.lineno) + 1))
    return inside


def statement_lines(text: str) -> dict[int, int]:
    """line -> the first line of the innermost statement holding it (a compound statement: its
    header, up to its first body statement)."""
    spans: dict[int, range] = {}
    for node in ast.walk(ast.parse(text)):
        if not isinstance(node, ast.stmt):
            continue
        body = [child for field in ("body", "orelse", "finalbody", "handlers")
                for child in getattr(node, field, [])]  # fmt: skip
        end = (min(child.lineno for child in body) - 1) if body else node.end_lineno
        span = range(node.lineno, max(node.lineno, end or node.lineno) + 1)
        for line in span:
            if line not in spans or len(span) < len(spans[line]):
                spans[line] = span
    return {line: span.start for line, span in spans.items()}


def _functions(namespace: dict, filename: str):
    """(qualified name, function) of every function and method defined in `filename`."""
    for name, obj in namespace.items():
        if isinstance(obj, types.FunctionType) and obj.__code__.co_filename == filename:
            yield name, obj
        elif isinstance(obj, type):
            for attr, member in vars(obj).items():
                func = getattr(member, "__func__", member)
                if isinstance(member, property):
                    func = member.fget
                if isinstance(func, types.FunctionType) and func.__code__.co_filename == filename:
                    yield f"{name}.{attr}", func


def swap_code(module: types.ModuleType, source: str) -> bool:
    """Give the functions of `module` the code objects compiled from `source` (a mutant).
    False (and nothing changed) where a code object cannot go into its function (a mutant that
    changes a closure, such as a deleted `super().__init__()`): run that one as a fresh import."""
    filename = module.__file__
    # HITS is there for a probed source whose module-level code calls its own functions (a
    # table computed at import): the probes would fail on a missing name.
    namespace: dict = {"__name__": module.__name__, "__file__": filename,
                       "__package__": module.__package__, HITS: set()}  # fmt: skip
    exec(compile(source, filename, "exec"), namespace)
    mutated = dict(_functions(namespace, filename))
    pairs = [(func, mutated[name]) for name, func in _functions(vars(module), filename)
             if name in mutated]  # fmt: skip
    if any(len(f.__code__.co_freevars) != len(n.__code__.co_freevars) for f, n in pairs):
        return False
    for func, new in pairs:
        func.__code__ = new.__code__
        func.__defaults__ = new.__defaults__
        func.__kwdefaults__ = new.__kwdefaults__
    return True
