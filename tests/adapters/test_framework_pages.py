"""The framework pages' CPU setup is what the tests' framework environment installs, and each
page's setup block runs as printed in that environment (SGLang 0.5.23, vLLM 0.33.0) and prints
what the page says; without the adapter's switch the same block fails as the page says."""

from __future__ import annotations

import re
import subprocess

import pytest

from tests.adapters.envs import (
    FRAMEWORK_PINS,
    REPO_ROOT,
    REQUIREMENT_FILES,
    REQUIREMENTS_DIR,
    RUNTIME_PINS,
    SPECREG_PINS,
)

PAGES = REPO_ROOT / "docs" / "frameworks"
#: page -> (its switch, the framework's pin, the requirement lists it installs, the lines its
#: setup block prints, what the block raises with the switch off)
FRAMEWORKS = {
    "sglang": ("SPECREG_SGLANG", "sglang==0.5.23", REQUIREMENT_FILES[:1],
               ["steps, topk, draft tokens: 3 1 4", "target_verify width: 4",
                "specreg's plan: 3"],
               "TypeError: '>' not supported between instances of 'NoneType' and 'int'"),
    "vllm": ("SPECREG_VLLM", "vllm==0.33.0", REQUIREMENT_FILES,
             ["eagle k: 3", "ngram drafts: [[8, 9, 1]]"],
             "`num_speculative_tokens` was not provided"),
}


def _setup(name: str) -> str:
    page = (PAGES / f"{name}.md").read_text(encoding="utf-8")
    start = page.index("## Run it on a CPU machine")
    return page[start: page.index("\n## ", start + 1)]


def _blocks(text: str, language: str) -> list[str]:
    return re.findall(rf"```{language}\n(.*?)```", text, flags=re.DOTALL)


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_the_cpu_recipe_installs_what_the_tests_environment_pins(name):
    switch, pin, lists, _, _ = FRAMEWORKS[name]
    assert pin in FRAMEWORK_PINS
    recipe = _blocks(_setup(name), "bash")[0]
    for needed in (pin, *RUNTIME_PINS, *SPECREG_PINS):
        assert needed in recipe, needed
    for listed in lists:
        assert f"tests/adapters/requirements/{listed}" in recipe
        assert (REQUIREMENTS_DIR / listed).is_file()
    assert all("--no-deps" in line for line in recipe.splitlines() if "pip install" in line)
    launch = _blocks((PAGES / f"{name}.md").read_text(encoding="utf-8"), "bash")
    assert any(f"{switch}=enforce" in block and "specreg check" in block for block in launch)


@pytest.mark.parametrize("name", FRAMEWORKS)
def test_the_setup_block_runs_as_printed(framework_env, name):
    switch, _, _, printed, refused = FRAMEWORKS[name]
    setup = _setup(name)
    block = _blocks(setup, "python")[0]
    assert f'os.environ["{switch}"] = "enforce"' in block
    for line in printed:
        assert f"`{line}`" in setup, line  # the page says what the block prints

    def run(code: str) -> subprocess.CompletedProcess:
        return subprocess.run([str(framework_env.python), "-c", code], capture_output=True,
                              text=True, timeout=600, env=framework_env.subprocess_env())

    result = run(block)
    assert result.returncode == 0, result.stderr[-3000:]
    assert [line for line in result.stdout.splitlines() if line in printed] == printed
    switched_off = block.replace(f'os.environ["{switch}"] = "enforce"',
                                 f'os.environ["{switch}"] = "off"')
    off = run(switched_off)
    assert off.returncode != 0 and refused in off.stderr, off.stderr[-3000:]
