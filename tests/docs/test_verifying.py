"""The "Verifying your own tensors" page runs as printed: its Python blocks, executed in order in
one namespace, make the calls they show and their `assert` lines hold."""

from __future__ import annotations

import re
from pathlib import Path

PAGE = Path(__file__).parents[2] / "docs" / "verifying.md"


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_every_block_runs_in_order():
    blocks = _python_blocks(PAGE.read_text(encoding="utf-8"))
    assert len(blocks) >= 4
    namespace: dict[str, object] = {}
    for i, block in enumerate(blocks):
        exec(compile(block, f"{PAGE.name} block {i + 1}", "exec"), namespace)  # noqa: S102


def test_the_page_covers_greedy_sampled_and_tree_verification():
    code = "\n".join(_python_blocks(PAGE.read_text(encoding="utf-8")))
    for call in ("verify_greedy(candidates", "verify_from_logits(candidates", "SamplingParams.of(",
                 "top_p=", "verify_sampling(candidates", "drafter.tree(", "verify_greedy(tree",
                 "verify_from_logits(tree"):
        assert call in code, call
