"""The plugin tutorial's drafter contract and its generation loop are correct: the loop, as
printed, drafts with `plan.drafter.propose(history, lengths)` and reproduces greedy decoding."""

from __future__ import annotations

import re
from pathlib import Path
from types import ModuleType

import pytest
import torch

from specreg import Registry

ROOT = Path(__file__).parents[2]
TUTORIAL = (ROOT / "docs" / "writing-plugins.md").read_text(encoding="utf-8")


def _section(title: str) -> str:
    start = TUTORIAL.index(title)
    end = TUTORIAL.find("\n## ", start + 1)
    return TUTORIAL[start:end]


def _python_blocks(text: str) -> list[str]:
    return re.findall(r"```python\n(.*?)```", text, flags=re.DOTALL)


def test_tutorial_opens_as_a_tutorial_and_covers_the_drafter_hook():
    lines = [line for line in TUTORIAL.splitlines() if line and not line.startswith("<!--")]
    assert lines[0].startswith("# specreg-ngram")
    assert lines[1].startswith("This tutorial adds an algorithm to specreg")
    assert "This directory is" not in TUTORIAL
    assert "| `specreg_make_drafter` |" in TUTORIAL
    contract = _section("## 6. The drafter")
    assert "`drafter.propose(history, lengths)`" in contract and "`[b, gamma]`" in contract
    assert "[hook reference](reference/hooks.md)" in TUTORIAL
    assert "specreg/hookspecs.py" not in TUTORIAL


def test_error_entry_snippet_imports_what_it_uses():
    snippet = next(b for b in _python_blocks(TUTORIAL) if "CHAIN_MISMATCH = ErrorEntry(" in b)
    code = "\n".join(line[2:] if line.startswith("  ") else line for line in snippet.splitlines())
    code = code.replace('"..."', '"x"').replace('["..."]', '["x"]')
    namespace: dict[str, object] = {}
    exec(compile(code, "tutorial-error-entry", "exec"), namespace)  # noqa: S102 - the docs' code
    assert namespace["CHAIN_MISMATCH"].code == "SR501"


def test_generation_loop_as_printed_equals_greedy_decoding(monkeypatch):
    monkeypatch.syspath_prepend(str(ROOT / "examples" / "specreg-ngram"))
    import specreg_ngram.plugin

    registry = Registry.load(allowlist=frozenset(), fresh=True)
    assert registry.register_plugin(specreg_ngram.plugin, "ngram") == "ngram"
    loop = _python_blocks(_section("## 7. Use it in a generation loop"))[0]
    assert "drafter.propose(history, lengths)" in loop
    vocab, b, prompt, steps = 32, 3, 12, 6
    table = torch.randn(vocab, vocab, generator=torch.Generator().manual_seed(0))

    def target_forward(candidates: torch.Tensor) -> torch.Tensor:
        return table[candidates]  # a bigram target: row i scores the token after candidate i

    history = torch.zeros(b, prompt + steps * 5, dtype=torch.long)
    history[:, :prompt] = torch.randint(0, vocab, (b, prompt), generator=torch.Generator().manual_seed(1))
    lengths = torch.full((b,), prompt, dtype=torch.long)
    start = history.clone()
    namespace = {"target_forward": target_forward, "history": history, "lengths": lengths,
                 "steps": steps}
    code = loop.replace("Registry.load()", "_registry")
    exec(compile(code, "tutorial-loop", "exec"), {**namespace, "_registry": registry})  # noqa: S102
    assert int(lengths.min()) > prompt + steps - 1  # at least one token per step
    for r in range(b):
        expected = start[r, :prompt].tolist()
        while len(expected) < int(lengths[r]):
            expected.append(int(table[expected[-1]].argmax()))
        assert history[r, : int(lengths[r])].tolist() == expected


def test_the_contracts_draft_lengths_snippet_caps_each_request(monkeypatch):
    """The drafter contract's `draft_lengths` snippet, run as printed on the example's plan:
    request r keeps its first draft_lengths[r] drafts, its last token fills the rest, the
    plan's verifier accepts none past the cap, and a length above gamma is SR921."""
    from specreg.errors import KernelInputError

    monkeypatch.syspath_prepend(str(ROOT / "examples" / "specreg-ngram"))
    import specreg_ngram.plugin

    contract = _section("## 6. The drafter")
    assert "`draft_lengths=`" in contract and "optional" in contract
    snippet = next(b for b in _python_blocks(contract) if "class CappedNgramDrafter" in b)
    namespace: dict[str, object] = {}
    exec(compile(snippet, "tutorial-draft-lengths", "exec"), namespace)  # noqa: S102
    registry = Registry.load(allowlist=frozenset(), fresh=True)
    registry.register_plugin(specreg_ngram.plugin, "ngram")
    plan = registry.resolve({"algorithm": "ngram_example", "num_draft_tokens": 5})
    drafter = namespace["CappedNgramDrafter"](num_draft_tokens=plan.gamma + 1)
    history = torch.tensor([[1, 2, 3, 1, 2, 3, 1, 2], [4, 5, 6, 4, 5, 6, 4, 0],
                            [7, 8, 9, 7, 8, 9, 7, 8]])
    lengths = torch.tensor([8, 7, 8])
    full = drafter.propose(history, lengths)
    capped = drafter.propose(history, lengths, draft_lengths=[0, 2, plan.gamma])
    assert capped.shape == full.shape == (3, plan.gamma)
    assert capped[0].tolist() == [2] * plan.gamma  # no drafts: the last token throughout
    assert capped[1].tolist() == full[1, :2].tolist() + [4] * (plan.gamma - 2)
    assert capped[2].tolist() == full[2].tolist()
    candidates = torch.cat([history.gather(1, (lengths - 1)[:, None]), capped], dim=1)
    logits = torch.zeros(3, plan.gamma + 1, 10)
    logits[torch.arange(3)[:, None], torch.arange(plan.gamma)[None, :], capped] = 1.0
    result = plan.verifier.verify_greedy(candidates, logits, draft_lengths=[0, 2, plan.gamma])
    assert result.num_accepted.tolist() == [0, 2, plan.gamma]  # the target agrees with all
    with pytest.raises(KernelInputError) as err:
        drafter.propose(history, lengths, draft_lengths=[0, 1, plan.gamma + 1])
    assert err.value.codes == ("SR921",)


@pytest.mark.parametrize("rel", ["writing-plugins.md"])
def test_tutorial_never_calls_propose_with_a_list(rel):
    text = (ROOT / "docs" / rel).read_text(encoding="utf-8")
    assert "propose(histories)" not in text


def test_widths_page_names_sglang():
    page = (ROOT / "docs" / "reference" / "widths.md").read_text(encoding="utf-8")
    assert "This is the table SGLang keeps by hand" in page and "vLLM" not in page


def test_benchmark_chart_includes_the_planned_copy_row():
    import importlib.util

    spec = importlib.util.spec_from_file_location("run_cpu", ROOT / "benchmarks" / "run_cpu.py")
    run_cpu = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(run_cpu)
    measured = {"ratios": [
        {"label": "HiSparse swap (torch) vs naive reference", "value": 31.0, "better": "higher", "target": 30.0},
        {"label": "HiSparse planned copy / index_copy_ bandwidth (%)", "value": 64.0, "better": "higher", "target": 50.0},
    ]}
    rows = {r["label"]: r for r in run_cpu.chart_rows(measured)}
    planned = rows["HiSparse planned copy / index_copy_ bandwidth (ratio)"]
    assert planned["value"] == 0.64 and planned["target"] == 0.5
    labels = [label for label, *_ in (p for _, _, ps in run_cpu.RUNS for p in ps)]
    assert "HiSparse planned copy / index_copy_ bandwidth (%)" in labels


def _library_names() -> dict[str, str]:
    """Names a snippet may only use after importing them: specreg's public API (and the modules
    the tutorial imports from), torch, and the example plugin's own modules."""
    import specreg
    import specreg.catalog
    import specreg.contract.memory
    import specreg.testing

    out = {"torch": "torch", "NgramDrafter": "specreg_ngram.drafter"}
    for module in (specreg, specreg.catalog, specreg.contract.memory, specreg.testing):
        out |= {
            name: module.__name__ for name in dir(module)
            if not name.startswith("_") and not isinstance(getattr(module, name), ModuleType)
        }
    out["CHAIN_MISMATCH"] = "specreg_ngram.errors"
    return out


def _unimported(block: str, library: dict[str, str]) -> set[str]:
    import ast

    code = "\n".join(line[2:] if line.startswith("  ") else line for line in block.splitlines())
    tree = ast.parse(code)
    bound = {a.asname or a.name.split(".")[0] for node in ast.walk(tree)
             if isinstance(node, (ast.Import, ast.ImportFrom)) for a in node.names}  # fmt: skip
    bound |= {node.name for node in ast.walk(tree)
              if isinstance(node, (ast.ClassDef, ast.FunctionDef))}  # fmt: skip
    bound |= {a.arg for node in ast.walk(tree) if isinstance(node, ast.FunctionDef)
              for a in node.args.args}  # fmt: skip
    bound |= {t.id for node in ast.walk(tree) if isinstance(node, ast.Assign)
              for t in node.targets if isinstance(t, ast.Name)}  # fmt: skip
    used = {node.id for node in ast.walk(tree)
            if isinstance(node, ast.Name) and isinstance(node.ctx, ast.Load)}  # fmt: skip
    return {name for name in used - bound if name in library}


def test_every_snippet_imports_the_library_names_it_uses():
    """Each Python snippet of the tutorial imports every specreg name (AlgorithmSpec,
    ParamRange, hookimpl, problem, Registry, Buffer, ...) and torch where it uses them, so a
    reader can paste it; a snippet missing one is named with the module to import it from."""
    library = _library_names()
    blocks = _python_blocks(TUTORIAL)
    assert len(blocks) >= 8
    missing = {
        i: {name: library[name] for name in _unimported(block, library)}
        for i, block in enumerate(blocks)
    }
    assert not {i: names for i, names in missing.items() if names}, missing
    # negative control: the spec snippet without its import line is caught
    spec = next(b for b in blocks if "NGRAM = AlgorithmSpec(" in b)
    stripped = "\n".join(line for line in spec.splitlines() if not line.startswith("from specreg "))
    assert {"AlgorithmSpec", "ParamRange", "hookimpl"} <= _unimported(stripped, library)


def test_tutorial_installs_specreg_from_a_checkout_or_a_wheel_and_documents_memory():
    install = _section("## 5. Install it and see it")
    assert "pip install -e path/to/specreg" in install and ".whl" in install
    assert install.index("pip install -e path/to/specreg ") < install.index("specreg-ngram\n")
    assert "pip install specreg" not in TUTORIAL
    memory = _section("## 6. The drafter")
    for owner in ("plan.verifier", "plan.drafter", "plan.cache_swapper"):
        assert f"| `{owner}` |" in memory, owner
    assert "PER_REQUEST" in memory and "unstated" in memory
    assert "### Adaptive candidates" in memory and "drafts[:, : candidate.gamma]" in memory
