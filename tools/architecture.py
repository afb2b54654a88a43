"""Draw specreg's wings from its imports: the picture and the table on docs/architecture.md.

A wing is a folder of `specreg/` (or a module at its root); the built-in plugins are drawn as one
more room above them. Rooms stand on floors: a room stands one floor above the highest room it
imports, so every arrow runs down. The picture (`docs/img/wings.svg`) and the table between the
markers on `docs/architecture.md` are made from the code each time; `tests/house/
test_architecture_page.py` fails when the committed ones differ.

Run ``python tools/architecture.py`` from the repository root to rewrite both.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterator, Mapping, Set
from functools import cache
from html import escape
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CORE = ROOT / "specreg"
PLUGINS = ROOT / "plugins"
PAGE = ROOT / "docs" / "architecture.md"
PICTURE = ROOT / "docs" / "img" / "wings.svg"
START, END = "<!-- wings:start -->", "<!-- wings:end -->"
PLUGINS_ROOM = "plugins/"


def room_of(path: Path) -> str:
    """The room a file stands in: its folder right under specreg/ ('kernels/'), the module itself
    at specreg/'s root ('errors.py'), or 'plugins/' for every built-in plugin."""
    if path.is_relative_to(PLUGINS):
        return PLUGINS_ROOM
    parts = path.relative_to(CORE).parts
    return parts[0] + "/" if len(parts) > 1 else parts[0]


def _files() -> list[Path]:
    return sorted(CORE.rglob("*.py")) + sorted(PLUGINS.rglob("*.py"))


def _module_path(dotted: str) -> Path | None:
    """The file of an importable specreg or built-in plugin module, or None."""
    parts = dotted.split(".")
    base = CORE.parent if parts[0] == "specreg" else PLUGINS
    for end in range(len(parts), 0, -1):
        stem = base.joinpath(*parts[:end])
        for candidate in (stem.with_suffix(".py"), stem / "__init__.py"):
            if candidate.is_file() and (candidate.is_relative_to(CORE) or candidate.is_relative_to(PLUGINS)):
                return candidate
    return None


def _imports(path: Path) -> Iterator[Path]:
    """The files of this tree that `path` imports, anywhere in it (functions included)."""
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            target = _module_path(name)
            if target is not None:
                yield target


@cache
def arrows() -> dict[str, frozenset[str]]:
    """room -> the rooms it imports (itself left out)."""
    out: dict[str, set[str]] = {}
    for path in _files():
        source = room_of(path)
        out.setdefault(source, set())
        out[source] |= {room_of(t) for t in _imports(path)} - {source}
    return {room: frozenset(targets) for room, targets in out.items()}


def reduced(graph: Mapping[str, Set[str]] | None = None) -> dict[str, frozenset[str]]:
    """The arrows no longer path implies (the transitive reduction): what the picture draws.
    `graph` is today's rooms and arrows unless given."""
    graph = arrows() if graph is None else graph
    below: dict[str, frozenset[str]] = {}

    def under(room: str) -> frozenset[str]:
        if room not in below:
            below[room] = frozenset().union(*({t} | under(t) for t in graph[room]))
        return below[room]

    return {room: frozenset(t for t in targets if not any(t in under(o) for o in set(targets) - {t}))
            for room, targets in graph.items()}


def floors(graph: Mapping[str, Set[str]] | None = None) -> dict[str, int]:
    """room -> floor (1: imports no other room); `graph` is today's rooms and arrows unless
    given. Raises on a circle (the import-graph test names its files)."""
    graph = arrows() if graph is None else graph
    floor: dict[str, int] = {}

    def visit(room: str, path: tuple[str, ...]) -> int:
        if room in path:
            raise ValueError(f"circle: {' -> '.join(path + (room,))}")
        if room not in floor:
            floor[room] = 1 + max((visit(t, path + (room,)) for t in graph[room]), default=0)
        return floor[room]

    for room in graph:
        visit(room, ())
    return floor


def core_floors() -> int:
    """How many floors the core (specreg/ without the plugins) stands on."""
    return max(f for room, f in floors().items() if room != PLUGINS_ROOM)


def job(room: str) -> str:
    """A room's job: the first paragraph of its folder's `__init__` docstring, or the module's."""
    if room == PLUGINS_ROOM:
        return "The built-in plugins, each loaded through the `specreg` entry points like any third party's."
    path = CORE / room / "__init__.py" if room.endswith("/") else CORE / room
    doc = ast.get_docstring(ast.parse(path.read_text(encoding="utf-8"))) or ""
    return " ".join(doc.strip().split("\n\n")[0].split())


def table() -> str:
    floor = floors()
    rows = ["| floor | wing | its job | imports |", "| --- | --- | --- | --- |"]
    for room in sorted(floor, key=lambda r: (-floor[r], r)):
        where = room if room == PLUGINS_ROOM else f"specreg/{room}"
        imported = ", ".join(f"`{t}`" for t in sorted(arrows()[room], key=lambda r: (-floor[r], r)))
        rows.append(f"| {floor[room]} | `{where}` | {job(room).replace('|', '/')} "
                    f"| {imported} |")
    return "\n".join(rows)


# ---------------------------------------------------------------------------------- picture
BOX_W, BOX_H, GAP_X, ROW_H, MARGIN = 150, 34, 18, 64, 16


def svg() -> str:
    """The wings as boxes on their floors (highest on top) and their imports as arrows down."""
    floor = floors()
    top = max(floor.values())
    rows: dict[int, list[str]] = {}
    for room in sorted(floor):
        rows.setdefault(floor[room], []).append(room)
    widest = max(len(r) for r in rows.values())
    width = MARGIN * 2 + widest * BOX_W + (widest - 1) * GAP_X
    height = MARGIN * 2 + top * ROW_H - (ROW_H - BOX_H)
    at: dict[str, tuple[float, float]] = {}
    for f, rooms in rows.items():
        span = len(rooms) * BOX_W + (len(rooms) - 1) * GAP_X
        x0 = (width - span) / 2
        y = MARGIN + (top - f) * ROW_H
        for i, room in enumerate(rooms):
            at[room] = (x0 + i * (BOX_W + GAP_X), y)
    out = [
        f'<svg xmlns="http://www.w3.org/2000/svg" viewBox="0 0 {width:.0f} {height:.0f}" '
        f'width="{width:.0f}" height="{height:.0f}" font-family="sans-serif" font-size="13">',
        "<title>specreg's wings: each box a folder of specreg/ (or a module at its root) on its "
        "floor; each arrow an import no longer path implies, always downwards</title>",
        '<defs><marker id="head" viewBox="0 0 8 8" refX="8" refY="4" markerWidth="7" '
        'markerHeight="7" orient="auto"><path d="M0,0 L8,4 L0,8 z" fill="#8a8a8a"/></marker></defs>',
    ]
    for source, targets in sorted(reduced().items()):
        for target in sorted(targets):
            (sx, sy), (tx, ty) = at[source], at[target]
            out.append(
                f'<line x1="{sx + BOX_W / 2:.1f}" y1="{sy + BOX_H:.1f}" x2="{tx + BOX_W / 2:.1f}" '
                f'y2="{ty:.1f}" stroke="#8a8a8a" stroke-opacity="0.45" marker-end="url(#head)"/>'
            )
    for f in sorted(rows, reverse=True):
        y = MARGIN + (top - f) * ROW_H
        out.append(f'<text x="4" y="{y + BOX_H / 2 + 4:.1f}" fill="#666" font-size="11">{f}</text>')
    for room, (x, y) in sorted(at.items()):
        fill = "#fdf0d5" if room == PLUGINS_ROOM else ("#dbe9f6" if room.endswith("/") else "#eeeeee")
        out.append(f'<rect x="{x:.1f}" y="{y:.1f}" width="{BOX_W}" height="{BOX_H}" rx="5" '
                   f'fill="{fill}" stroke="#4a4a4a"/>')
        out.append(f'<text x="{x + BOX_W / 2:.1f}" y="{y + BOX_H / 2 + 4.5:.1f}" '
                   f'text-anchor="middle">{escape(room)}</text>')
    out.append("</svg>")
    return "\n".join(out) + "\n"


def page(current: str) -> str:
    """`current` with the generated table between the markers replaced by today's."""
    head, _, rest = current.partition(START)
    _, _, tail = rest.partition(END)
    return f"{head}{START}\n{table()}\n{END}{tail}"


def main() -> int:
    PICTURE.write_text(svg(), encoding="utf-8")
    PAGE.write_text(page(PAGE.read_text(encoding="utf-8")), encoding="utf-8")
    print(f"wrote {PICTURE.relative_to(ROOT)} and the table on {PAGE.relative_to(ROOT)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
