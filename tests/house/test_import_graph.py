"""The import graph of specreg/ and plugins/: no circle between modules, no arrow back up, and no
import of a kernel family's insides from outside it.

Every import counts, at module level, inside a function or under TYPE_CHECKING: a circle hidden
in a function is still a circle. Besides the modules themselves, the graph is read with each
folder collapsed into one room (specreg/kernels/, then specreg/kernels/chain/, and so on): a
room that imports a room that imports it back has an arrow running back up its floors, even
when no two files form a circle (specreg/contract/config.py -> specreg/contract/framework_flags.py while
specreg/framework_args/translate.py -> specreg/contract/config.py would be one).

A kernel family (a folder `kernels/<family>/` of specreg or a plugin) is entered through its
`__init__`: its implementations `torch_impl` and `triton_impl` (and chain's compiled CPU path,
`numba_impl` with `numba_kernels`, as tree sampling's) are its insides (see
`test_no_family_insides_opened_from_outside` for the rule, tests and benchmarks included).
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
    "specreg_lookup": ROOT / "plugins",
    "specreg_medusa": ROOT / "plugins",
    "specreg_draft_model": ROOT / "plugins",
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
        assert not (isinstance(node, ast.ImportFrom) and node.level), (
            f"{path.relative_to(ROOT)}:{node.lineno}: a relative import (the graph reads "
            "absolute ones only)")
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


#: A kernel family's insides: its implementations, which only the family's own modules import.
#: The rest of a family is public: its `__init__` (the entry), `types` (the values its calls
#: take and return, which callers must build and read), `checks` (input rules other families
#: apply to the same inputs: positions, stream keys, tree layouts) and `reference` (the oracle,
#: which other families' references compose; test_plugin_shape keeps implementations off it).
INSIDES = ("torch_impl", "triton_impl", "numba_impl", "numba_kernels")


def _family(module: str) -> str | None:
    """The kernel family `module` belongs to ('specreg.kernels.chain' for
    'specreg.kernels.chain.torch_impl' and for the family's __init__), None outside every family
    (a module shared by the families, specreg/kernels/row_chunks.py, belongs to none)."""
    path = MODULES[module]
    folder = path.parent
    if folder.parent.name != "kernels":
        return None
    return module if path.name == "__init__.py" else module.rsplit(".", 1)[0]


def _inside(module: str) -> str | None:
    """The family whose insides `module` is, or None."""
    family = _family(module)
    return family if family is not None and module.rsplit(".", 1)[-1] in INSIDES else None


def _opened_insides(graph: dict[str, dict[str, set[str]]]) -> list[str]:
    """'importer -> module: names' for every import of a family's insides from outside it."""
    out = []
    for source, targets in sorted(graph.items()):
        for target, used in sorted(targets.items()):
            family = _inside(target)
            if family is not None and _family(source) != family:
                out.append(f"{source} -> {target}: {', '.join(sorted(used))}")
    return out


def _short(package: str) -> str:
    """The name of a package's wing of tests/: 'kernels' for the core's families, 'eagle' for
    specreg_eagle's."""
    return "kernels" if package == "specreg" else package.removeprefix("specreg_")


def _may_open(path: str, package: str) -> bool:
    """Whether the test or benchmark at `path` (relative to the root) may open the insides of
    `package`'s families: a test in the package's wing of tests/, or any benchmark."""
    return path.startswith((f"tests/{_short(package)}/", "benchmarks/"))


def _tests_opening_insides(files: dict[str, list[tuple[str, str]]]) -> list[str]:
    """'file -> module: names' for every import of a family's insides by a test or benchmark
    file that does not test or time that family's package (`files`: path -> its imports)."""
    out = []
    for path, imports in sorted(files.items()):
        opened: dict[str, set[str]] = {}
        for target, used in imports:
            family = _inside(target) if target else None
            if family is not None and not _may_open(path, family.split(".")[0]):
                opened.setdefault(target, set()).add(used)
        out += [f"{path} -> {target}: {', '.join(sorted(used))}"
                for target, used in sorted(opened.items())]
    return out


def _test_and_benchmark_imports() -> dict[str, list[tuple[str, str]]]:
    files = sorted([*(ROOT / "tests").rglob("*.py"), *(ROOT / "benchmarks").rglob("*.py")])
    return {str(path.relative_to(ROOT)): list(_imported(path)) for path in files}


def test_no_family_insides_opened_from_outside():
    """A kernel family's `torch_impl` and `triton_impl` are its insides: only the modules of its
    own folder import them. Everything else reaches the family through its `__init__` (which
    exports what other code needs: `filtering`'s row statistics, `random_stream`'s key lanes,
    `chain`'s pieces for the chain families built on it, the Triton device functions other
    kernels fuse), its `types`, `checks` and `reference` (public, see `INSIDES`), or through the
    modules every family shares under specreg/kernels/ (`row_chunks`, `exp_log`, `block_race`,
    `race_tiles`), which belong to no family.

    Tests and benchmarks stand outside every family too, with one licence each. A test may open
    a family's insides only to test that family, and a test tests the families of the package
    whose wing of tests/ it sits in (tests/kernels/: the core's, specreg/kernels/; tests/dspark/:
    specreg_dspark's; ...): any other test (a step test comparing a drafter with a verifier, an
    adapter's parity test, a core test of a plugin) uses the public entries. A benchmark times
    implementations, the torch path beside the Triton one, so it may open the insides of the
    families it times, whichever package holds them (EAGLE's benchmarks time the core's tree
    families); nothing imports a benchmark, so what it opens goes no further.
    """
    opened = _opened_insides(GRAPH)
    assert not opened, "import through the family's __init__:\n  " + "\n  ".join(opened)
    by_tests = _tests_opening_insides(_test_and_benchmark_imports())
    assert not by_tests, (
        "a test or benchmark opens the insides of a family it does not test:\n  "
        + "\n  ".join(by_tests))


def test_the_check_finds_insides_opened_from_outside(monkeypatch):
    """Negative controls: a planted import of a family's torch_impl from another family and from
    a step module, and one by a test of another wing or of no package's wing, are found; the
    family's own import of its insides, a test of its own wing and a benchmark are not."""
    assert _inside("specreg.kernels.filtering.torch_impl") == "specreg.kernels.filtering"
    assert _inside("specreg.kernels.filtering") is None  # the entry
    assert _inside("specreg.kernels.chain.types") is None  # public
    assert _family("specreg.kernels.triton_shim") is None  # shared, no family's
    own = _opened_insides({"specreg.kernels.filtering": {"specreg.kernels.filtering.torch_impl": {"x"}}})
    assert own == []
    planted = {
        "specreg.kernels.logprobs.torch_impl": {"specreg.kernels.filtering.torch_impl": {"RowStats"}},
        "specreg.step.draft_sampling": {"specreg_dspark.kernels.markov_greedy.triton_impl": {"y"}},
    }
    monkeypatch.setitem(GRAPH, "specreg.step.draft_sampling",
                        {**GRAPH["specreg.step.draft_sampling"], **planted["specreg.step.draft_sampling"]})
    assert _opened_insides(planted) == [
        "specreg.kernels.logprobs.torch_impl -> specreg.kernels.filtering.torch_impl: RowStats",
        "specreg.step.draft_sampling -> specreg_dspark.kernels.markov_greedy.triton_impl: y",
    ]
    assert "specreg.step.draft_sampling -> specreg_dspark.kernels.markov_greedy.triton_impl: y" in (
        _opened_insides(GRAPH))
    files = {
        "tests/eagle/test_x.py": [("specreg.kernels.sampling.torch_impl", "hash_coins"),
                                  ("specreg_eagle.kernels.select_topk.torch_impl", "select")],
        "tests/kernels/test_x.py": [("specreg.kernels.sampling.torch_impl", "hash_coins")],
        "benchmarks/bench_eagle_x.py": [("specreg.kernels.tree_build.triton_impl", "t")],
        "tests/step/test_x.py": [("specreg.kernels.filtering.torch_impl", "row_stats")],
    }
    assert _tests_opening_insides(files) == [
        "tests/eagle/test_x.py -> specreg.kernels.sampling.torch_impl: hash_coins",
        "tests/step/test_x.py -> specreg.kernels.filtering.torch_impl: row_stats",
    ]
