"""CI runs exactly the README's test command (the quickstart's too), and the README opens with
the two commands."""

import re
from pathlib import Path

ROOT = Path(__file__).parents[2]


def _bash_blocks(text: str) -> list[str]:
    return [b.strip() for b in re.findall(r"```bash\n(.*?)```", text, flags=re.S)]


def test_ci_runs_the_readme_test_command():
    blocks = _bash_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    setup, tests = blocks[0], blocks[1]
    assert setup.endswith("specreg demo") and "torch==2.13.0" in setup
    assert tests.endswith("python -m pytest -q")
    ci = (ROOT / ".ci" / "run").read_text(encoding="utf-8").strip().splitlines()
    assert ci[-1] == tests
    assert [line for line in ci if line and not line.startswith(("#", "set ", "cd "))] == [tests]


def test_the_quickstart_says_what_ci_runs_as_the_readme_does():
    """Both pages say "exactly what CI runs"; they once listed different extras."""
    readme = _bash_blocks((ROOT / "README.md").read_text(encoding="utf-8"))
    quickstart = _bash_blocks((ROOT / "docs" / "index.md").read_text(encoding="utf-8"))
    assert quickstart[:2] == readme[:2]
