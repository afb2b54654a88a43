"""A plugin author's deliberate mistakes, each in a distribution of its own written to a folder.

The plugin is the tutorial's kind of plugin, a drafter that repeats the last token, written
correctly (`MISTAKES["none"]`) or with one mistake each: a tree algorithm without a verifier,
a resolution that ignores num_steps, sizes whose gamma reaches the verify width, a drafter built
for another gamma, a validate hook returning one Problem instead of a list, the drafter class
returned instead of an instance. The last two come again in a plugin whose drafter hook imports
torch (`Mistake.torch`), as a real drafter's does: `specreg check`, which imports neither torch
nor triton, must find them by building the objects in a child process.
`write_distribution(root, mistake)` writes the module and a
dist-info whose entry_points.txt names it in group `specreg`, so putting `root` on sys.path (or
PYTHONPATH) installs it as pip would.
"""

from __future__ import annotations

from pathlib import Path

import attrs

ALGORITHM = "repeat"

_HEADER = '''"""A drafter that repeats the last token, with one deliberate mistake: {mistake}."""

from specreg import AlgorithmSpec, ParamRange, Sizes, hookimpl, problem

SPEC = AlgorithmSpec(
    name="{algorithm}", drafting="{drafting}", verify_rules=("greedy", "chain_sampling"),
    uses_target_hidden_states=False, owns_draft_kv=False,
    num_steps=ParamRange(minimum=1, maximum=15, default=3), topk=ParamRange(1, 1, 1),
    num_draft_tokens=ParamRange(minimum=2, maximum=16, default=4),
)


class RepeatDrafter:
    """Proposes the last committed token gamma times (torch only when it proposes)."""

    needs = "token_history"

    def __init__(self, gamma):
        self.gamma = gamma

    def propose(self, history, lengths, *, draft_lengths=None):
        last = history.gather(1, (lengths - 1)[:, None])
        return last.expand(-1, self.gamma).clone()


@hookimpl
def specreg_register_algorithms(register):
    register(SPEC)
'''

_DRAFTER = '''

@hookimpl
def specreg_make_drafter(config, algorithm, resolution):
    if algorithm.name != "{algorithm}":
        return None{torch_import}
    return {returned}
'''

_TORCH_IMPORT = """
    import torch  # noqa: F401 - the drafter's module needs torch, imported when a plan is built"""


@attrs.frozen
class Mistake:
    """One mistake: what it is, the plugin code it takes, the code every command must report
    (None: none), and the flags that show it."""

    what: str
    code: str | None
    drafting: str = "chain"
    drafter: str | None = "RepeatDrafter(resolution.gamma)"
    extra: str = ""
    flags: tuple[str, ...] = ()
    torch: bool = False  # the drafter hook imports torch


MISTAKES = {
    "none": Mistake("none", None),
    "no verifier": Mistake(
        "a tree algorithm without specreg_make_verifier", "SR124", drafting="tree", drafter=None,
    ),
    "ignored steps": Mistake(
        "a resolution that keeps its own num_draft_tokens whatever num_steps is given", "SR127",
        extra='''

@hookimpl
def specreg_resolve_config(config, algorithm):
    if algorithm.name != "{algorithm}":
        return None
    return config.evolve(num_steps=config.num_steps or 3, topk=1,
                         num_draft_tokens=config.num_draft_tokens or 4)
''',
        flags=("--speculative-num-steps", "6"),
    ),
    "gamma at the verify width": Mistake(
        "specreg_resolve_sizes answering gamma = the verify width", "SR125",
        extra='''

@hookimpl
def specreg_resolve_sizes(configs, algorithm):
    if algorithm.name != "{algorithm}":
        return None
    widths = [{{"draft_decode": 1, "draft_extend": c.num_draft_tokens,
                "target_verify": c.num_draft_tokens}} for c in configs]
    return [Sizes.same_on_both(c.num_draft_tokens, w) for c, w in zip(configs, widths)]
''',
    ),
    "drafter for another gamma": Mistake(
        "a drafter built for one draft more than the plan's gamma", "SR126",
        drafter="RepeatDrafter(resolution.gamma + 1)",
    ),
    "validate returns a Problem": Mistake(
        "specreg_validate_config returning one Problem instead of a list", "SR128",
        extra='''

@hookimpl
def specreg_validate_config(config, algorithm):
    if algorithm.name != "{algorithm}":
        return []
    return problem("SR103", "repeat: a problem outside a list", fix="none", field="num_steps")
''',
    ),
    "drafter class": Mistake(
        "the drafter class returned instead of an instance", "SR123", drafter="RepeatDrafter",
    ),
    "torch drafter for another gamma": Mistake(
        "a drafter built for one draft more than the plan's gamma, by a hook importing torch",
        "SR126", drafter="RepeatDrafter(resolution.gamma + 1)", torch=True,
    ),
    "torch drafter class": Mistake(
        "the drafter class returned instead of an instance, by a hook importing torch", "SR123",
        drafter="RepeatDrafter", torch=True,
    ),
}


def plugin_source(mistake: Mistake) -> str:
    source = _HEADER.format(mistake=mistake.what, algorithm=ALGORITHM, drafting=mistake.drafting)
    if mistake.drafter is not None:
        source += _DRAFTER.format(algorithm=ALGORITHM, returned=mistake.drafter,
                                  torch_import=_TORCH_IMPORT if mistake.torch else "")
    return source + mistake.extra.format(algorithm=ALGORITHM)


def module_name(name: str) -> str:
    return "repeat_" + "_".join(name.lower().split()).replace("-", "_")


def write_distribution(root: Path, name: str, mistake: Mistake | None = None) -> str:
    """Write the plugin with mistake `name` (`MISTAKES[name]` unless `mistake` is given) and
    its dist-info under `root`; the entry-point (and module) name it registers under."""
    module = module_name(name)
    source = plugin_source(mistake or MISTAKES[name])
    (root / f"{module}.py").write_text(source, encoding="utf-8")
    info = root / f"{module}-0.1.dist-info"
    info.mkdir()
    (info / "METADATA").write_text(
        f"Metadata-Version: 2.1\nName: {module.replace('_', '-')}\nVersion: 0.1\n",
        encoding="utf-8",
    )
    (info / "entry_points.txt").write_text(f"[specreg]\n{module} = {module}\n", encoding="utf-8")
    return module
