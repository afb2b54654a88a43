"""The import graph of specreg/ and plugins/: no circle between modules, and no arrow back up.

Every import counts, at module level, inside a function or under TYPE_CHECKING: a circle hidden
in a function is still a circle. Besides the modules themselves, the graph is read with each
folder collapsed into one room (specreg/kernels/, then specreg/kernels/chain/, and so on): a
room that imports a room that imports it back has an arrow running back up its floors, even
when no two files form a circle (specreg/contract/config.py -> specreg/contract/framework_flags.py while
specreg/framework_args/translate.py -> specreg/contract/config.py would be one).
"""

from __future__ import annotations

import ast
from collections.abc import Iterator
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
#: The packages read, each with the folder that holds it.
PACKAGES = {
    "specreg": ROOT,
    "specreg_eagle": ROOT / "plugins",
    "specreg_dspark": ROOT / "plugins",
    "specreg_hisparse": ROOT / "plugins",
}


def _modules() -> dict[str, Path]:
    out = {}
    for package, base in PACKAGES.items():
        for path in sorted((base / package).rglob("*.py")):
            parts = path.relative_to(base).with_suffix("").parts
            name = ".".join(parts[:-1] if parts[-1] == "__init__" else parts)
            out[name] = path
    return out


MODULES = _modules()


def _imported(path: Path) -> Iterator[tuple[str, str]]:
    """(module imported, name used) for every import in the file that reaches a module read."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            for alias in node.names:
                yield _owner(alias.name), alias.name
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            for alias in node.names:
                child = f"{node.module}.{alias.name}"
                yield (child if child in MODULES else _owner(node.module)), alias.name


def _owner(dotted: str) -> str:
    """The longest prefix of `dotted` that is a module read ('' when none is)."""
    parts = dotted.split(".")
    for end in range(len(parts), 0, -1):
        candidate = ".".join(parts[:end])
        if candidate in MODULES:
            return candidate
    return ""


def _graph() -> dict[str, dict[str, set[str]]]:
    """module -> {module it imports: names used}."""
    graph: dict[str, dict[str, set[str]]] = {name: {} for name in MODULES}
    for name, path in MODULES.items():
        for target, used in _imported(path):
            if target and target != name:
                graph[name].setdefault(target, set()).add(used)
    return graph


GRAPH = _graph()


def _room(module: str, depth: int | None) -> str:
    """The room a module stands in when folders `depth` levels below a package are collapsed
    (None: every module is its own room). A package's own __init__ is a room of its own."""
    path = MODULES[module]
    base = PACKAGES[module.split(".")[0]]
    parts = path.relative_to(base).parts
    if depth is None or len(parts) <= depth + 1:
        return "/".join(parts)
    return "/".join(parts[: depth + 1]) + "/"


def _circles(depth: int | None) -> list[list[str]]:
    """Strongly connected groups of two or more rooms (Tarjan), each sorted."""
    edges: dict[str, set[str]] = {}
    for source, targets in GRAPH.items():
        a = _room(source, depth)
        edges.setdefault(a, set())
        for target in targets:
            b = _room(target, depth)
            if a != b:
                edges[a].add(b)
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    groups: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in sorted(edges.get(node, ())):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            group = []
            while True:
                top = stack.pop()
                on_stack.discard(top)
                group.append(top)
                if top == node:
                    break
            if len(group) > 1:
                groups.append(sorted(group))

    for node in sorted(edges):
        if node not in index:
            visit(node)
    return groups


def _ties(group: list[str], depth: int | None) -> list[str]:
    """The imports that tie a group's rooms: 'a.py -> b.py: names'."""
    out = []
    for source, targets in sorted(GRAPH.items()):
        for target, used in sorted(targets.items()):
            a, b = _room(source, depth), _room(target, depth)
            if a != b and a in group and b in group:
                out.append(f"{MODULES[source].relative_to(ROOT)} -> "
                           f"{MODULES[target].relative_to(ROOT)}: {', '.join(sorted(used))}")
    return out


def test_the_graph_reads_every_package_and_its_imports():
    assert {m.split(".")[0] for m in MODULES} == set(PACKAGES)
    assert "specreg.contract.config" in GRAPH["specreg.registry.translate"]
    assert "specreg.kernels.checks" in GRAPH["specreg.kernels.chain_params"]
    assert "specreg.registry.registry" in GRAPH["specreg.cli.command"]  # an import inside a function counts
    assert len(MODULES) > 140


@pytest.mark.parametrize("depth", [None, 3, 2, 1], ids=["modules", "depth3", "depth2", "depth1"])
def test_no_circle_and_no_arrow_back_up(depth):
    circles = _circles(depth)
    assert not circles, "\n".join(
        f"circle {i}: {' <-> '.join(group)}\n  " + "\n  ".join(_ties(group, depth))
        for i, group in enumerate(circles, 1)
    )


def test_the_check_finds_a_circle_and_an_arrow_back_up(monkeypatch):
    """Negative controls: a planted circle between two modules, and a planted arrow back up
    from a lower room into a folder that imports it, are both found."""
    config_imports = dict(GRAPH["specreg.contract.config"])
    monkeypatch.setitem(GRAPH, "specreg.contract.config", {**config_imports, "specreg.registry.translate": {"x"}})
    assert ["specreg/contract/config.py", "specreg/registry/translate.py"] in _circles(None)
    monkeypatch.setitem(GRAPH, "specreg.contract.config", config_imports)  # undo the circle
    # sampling_params -> kernels/triton_shim.py closes no circle of files, but kernels/ imports
    # sampling_params.py: seen as rooms, the arrow runs back up.
    monkeypatch.setitem(GRAPH, "specreg.contract.sampling_params", {"specreg.kernels.triton_shim": {"y"}})
    assert _circles(None) == []
    assert ["specreg/contract/", "specreg/kernels/"] in _circles(1)
