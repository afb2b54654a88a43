"""Running plugin code with torch and triton imports refused, for a command that promises not to import them.

`specreg check` builds the plan's objects as `specreg plan` does, to report what building finds
(a class where an instance belongs, a drafter built for another gamma), but promises to import
neither torch nor triton. Inside `heavy_imports_refused()` importing either raises
`ModuleNotFoundError` (unless the process imported it before), and `attempted` records that
some code tried: what it built is then not the real object, and its findings are set aside for
`specreg plan`. Every module imported inside is forgotten afterwards, since one may have kept a
fallback for the refused import. For one thread at a time: another thread importing torch
meanwhile would be refused as well.
"""

from __future__ import annotations

import importlib.abc
import sys
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from types import ModuleType

HEAVY = ("torch", "triton")


class ImportRefuser(importlib.abc.MetaPathFinder):
    """A finder that refuses the top-level packages `refused` and their submodules, and
    records whether anything asked for them."""

    def __init__(self, refused: Sequence[str]) -> None:
        self.refused = tuple(refused)
        self.attempted = False

    def find_spec(
        self, fullname: str, path: Sequence[str] | None, target: ModuleType | None = None
    ) -> None:
        if fullname.partition(".")[0] in self.refused:
            self.attempted = True
            raise ModuleNotFoundError(f"{fullname} is not imported here", name=fullname)
        return None


@contextmanager
def heavy_imports_refused() -> Iterator[ImportRefuser]:
    """Refuse importing torch and triton (those not imported yet) inside the block; forget the
    modules the block imported when it ends."""
    before = set(sys.modules)
    refuser = ImportRefuser([name for name in HEAVY if name not in sys.modules])
    sys.meta_path.insert(0, refuser)
    try:
        yield refuser
    finally:
        sys.meta_path.remove(refuser)
        for name in set(sys.modules) - before:
            del sys.modules[name]
