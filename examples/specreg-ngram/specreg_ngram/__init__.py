"""Prompt-lookup (n-gram) drafting for specreg.

`specreg_ngram.plugin` holds the hooks (loaded through the `specreg` entry point, torch-free);
`specreg_ngram.errors` its catalog entry SR501 (torch-free); `specreg_ngram.drafter` holds
`NgramDrafter`, which needs torch. `from specreg_ngram import
NgramDrafter` works too: it imports the drafter on first use.
"""

from __future__ import annotations

from typing import Any

__version__ = "0.1.0"
__all__ = ["NgramDrafter", "NgramMatch"]


def __getattr__(name: str) -> Any:
    if name in __all__:
        from specreg_ngram import drafter

        return getattr(drafter, name)
    raise AttributeError(f"module 'specreg_ngram' has no attribute {name!r}")
