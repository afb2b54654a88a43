"""What a resolution, and every object built from it, must satisfy before a plan is handed out.

Each check returns coded problems in the plugin author's terms (the hook, the plugin, the value,
the fix), so `Registry.check` and `Registry.resolve` refuse what could not run instead of handing
out a plan that fails at its first step: sizes that contradict each other (SR125), a chain whose
num_steps is not its gamma (SR127), a validate hook's answer of the wrong type (SR128), no
verifier (SR124), a class where an instance belongs or an object missing a protocol member
(SR123), objects built for other sizes than the plan's (SR126), and a verifier that does not
run the verify mode asked for (SR133). Imports neither torch nor triton.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

from specreg.contract.config import SpecConfig
from specreg.errors import Problem, problem
from specreg.integers import is_int
from specreg.contract.phase import PHASES, Phase
from specreg.contract.protocols import missing_members
from specreg.contract.resolution import Resolution, Sizes
from specreg.contract.specs import AlgorithmSpec, CacheSpec

#: The drafting styles specreg's default plugin builds a verifier for (ChainVerifier).
DEFAULT_VERIFIER_DRAFTING = ("chain", "block")
#: Codes that blame a plugin, not the user's input (SR127 blames the input when the user gave
#: both numbers).
PLUGIN_FAULTS = frozenset({"SR114", "SR115", "SR123", "SR124", "SR125", "SR126", "SR127",
                           "SR128"})
#: Fields whose own problem already explains a chain's steps (SR107 included: the plugin says
#: it ignores the value), so SR127 would only repeat it.
_STEP_FIELDS = ("num_steps", "num_draft_tokens")


# --------------------------------------------------------------------------------- the sizes
def sizes_problems(
    algorithm: AlgorithmSpec, resolution: Resolution, answered_by: str
) -> list[Problem]:
    """SR125 for the main config's and each candidate's sizes: 0 <= gamma < target_verify
    width, every width at least 1. `answered_by` names the hook and plugin that gave them."""
    labelled = [("the config", resolution.main)] + [
        (f"adaptive candidate step {c.steps}", c.sizes) for c in resolution.candidates
    ]
    out = []
    for label, sizes in labelled:
        wrong = _contradictions(sizes)
        if wrong:
            out.append(problem(
                "SR125",
                f"{answered_by} gives {algorithm.name!r} sizes that cannot run for {label}: "
                + "; ".join(wrong),
                accepted="0 <= gamma < target_verify width (gamma 0 only at width 1, no "
                "speculation; a verify scores the root and the gamma drafts after it) and every "
                "width >= 1",
                fix="plugin authors: return gamma = num_draft_tokens - 1 for a chain or block "
                "(the number of draft nodes for a tree) and widths of at least 1, or drop the "
                "override and let specreg's default specreg_resolve_sizes answer; users: report "
                "it to the plugin's authors",
                field="gamma",
            ))
    return out


def _contradictions(sizes: Sizes) -> list[str]:
    width = sizes.verify_width
    found = []
    if sizes.gamma < 0 or (sizes.gamma == 0 and width != 1):
        # gamma 0 with width 1 is no speculation: one plain sample per verify
        found.append(f"gamma {sizes.gamma} with a target_verify width of {width}")
    elif sizes.gamma >= width:
        found.append(f"gamma {sizes.gamma} is not below the target_verify width {width}")
    for worker, table in (("target", sizes.target), ("draft", sizes.draft)):
        zero = [phase.value for phase in PHASES if table[phase] < 1]
        if zero:
            found.append(f"the {worker} worker's {', '.join(zero)} width is below 1")
    return found


def chain_steps_problems(
    given: SpecConfig, algorithm: AlgorithmSpec, resolution: Resolution | None,
    found: Iterable[Problem], resolved_by: str,
) -> list[Problem]:
    """SR127 when a chain plan's num_steps is not its gamma (one of them silently ignored),
    unless a problem about either field, or sizes that cannot run (SR125), already explain it. `given` is the user's config,
    `resolved_by` the hook and plugin that resolved it."""
    if resolution is None or algorithm.drafting != "chain" or (resolution.config.topk or 1) != 1:
        return []
    steps, gamma = resolution.config.num_steps, resolution.main.gamma
    if steps is None or steps == gamma or any(
        p.field in _STEP_FIELDS or p.code == "SR125" for p in found
    ):
        return []
    drafts = resolution.config.num_draft_tokens
    if given.num_steps is not None and given.num_draft_tokens is not None:
        return [problem(
            "SR127",
            f"{algorithm.name} drafts a chain: num_steps={given.num_steps} drafts are verified "
            f"with num_draft_tokens = num_steps + 1 = {given.num_steps + 1}, got "
            f"{given.num_draft_tokens}",
            accepted="num_draft_tokens = num_steps + 1, or only one of the two",
            fix=f"set --speculative-num-draft-tokens {given.num_steps + 1}, or leave one of "
            "--speculative-num-steps and --speculative-num-draft-tokens out so it is inferred",
            field="num_draft_tokens",
        )]
    asked = "given" if given.num_steps is not None else "resolved"
    return [problem(
        "SR127",
        f"{resolved_by} resolved {algorithm.name!r} to num_steps={steps} ({asked}) with "
        f"num_draft_tokens={drafts}, so the plan drafts gamma={gamma}: a chain drafts one token "
        "per step, so one of the numbers is ignored",
        accepted=f"num_draft_tokens = num_steps + 1 = {steps + 1}",
        fix="plugin authors: infer num_draft_tokens = num_steps + 1 in specreg_resolve_config "
        "when only num_steps is set (specreg's default resolution does; return None from the "
        "hook for it to answer), and report given numbers that disagree from "
        "specreg_validate_config; users: give both numbers, num_draft_tokens = num_steps + 1",
        field="num_steps",
    )]


def validate_answer_problems(plugin: str, answer: Any) -> tuple[list[Problem], list[Problem]]:
    """The problems a specreg_validate_config answer reports, and SR128 for an answer that is
    not a list (or tuple) of `Problem`s, or for each item in it that is not one."""
    if not isinstance(answer, (list, tuple)):
        return [], [_wrong_validate_answer(plugin, answer, "the answer")]
    reported = [item for item in answer if isinstance(item, Problem)]
    wrong = [_wrong_validate_answer(plugin, item, "an item of the list")
             for item in answer if not isinstance(item, Problem)]
    return reported, wrong


def _wrong_validate_answer(plugin: str, value: Any, where: str) -> Problem:
    shown = type(value).__name__
    if isinstance(value, Problem):
        hint = f" ({value.code}: {value.message})"
    elif isinstance(value, str):
        hint = f" ({value[:60]!r})"
    else:
        hint = ""
    return problem(
        "SR128",
        f"plugin {plugin!r} returned {shown}{hint} from specreg_validate_config as {where}, "
        "which must be a list of specreg.Problem",
        accepted="a list of specreg.Problem ([] when the config is sound)",
        fix="plugin authors: return [problem(...)], a list even for one problem, and [] for "
        "algorithms the plugin does not own; users: report it to the plugin's authors",
        field="specreg_validate_config",
    )


# ------------------------------------------------------------------------------- the objects
def missing_verifier(algorithm: AlgorithmSpec, answered: bool, owner: str | None) -> Problem:
    """SR124: no plugin's specreg_make_verifier built a verifier (`answered`: whether some
    plugin implements the hook for the algorithm at all)."""
    why = ("its specreg_make_verifier returned None for it" if answered
           else "no plugin implements specreg_make_verifier for it")
    owned = f"plugin {owner!r}" if owner else "its plugin"
    if algorithm.drafting in DEFAULT_VERIFIER_DRAFTING:
        default = "specreg's ChainVerifier needs num_draft_tokens, which the config lacks"
        fix = (f"plugin authors ({owned}): resolve num_draft_tokens in specreg_resolve_config, "
               "or return a ChainVerifierProtocol object from specreg_make_verifier")
    else:
        default = "specreg's own ChainVerifier verifies chain and block drafting only"
        fix = (f"plugin authors ({owned}): implement specreg_make_verifier returning a "
               "TreeVerifierProtocol object for the algorithm (the tree contract in the hook "
               "reference; Medusa returns the core's TreeVerifier), or declare "
               "drafting='chain' when it drafts one chain per request")
    protocol = "ChainVerifierProtocol" if algorithm.drafting in DEFAULT_VERIFIER_DRAFTING else (
        "TreeVerifierProtocol")
    return problem(
        "SR124",
        f"{algorithm.name!r} ({algorithm.drafting} drafting) has no verifier: {why}, and "
        f"{default}",
        accepted=f"a verifier ({protocol}) from a plugin's specreg_make_verifier",
        fix=f"{fix}; users: report it to the plugin's authors",
        field="specreg_make_verifier",
    )


def object_problems(
    obj: Any, hook: str, plugin: str | None, protocol: type, owner: AlgorithmSpec | CacheSpec,
) -> list[Problem]:
    """SR123 for a class returned where an instance belongs, or an object that misses a
    member of `protocol` (`owner`: the algorithm or cache it was built for)."""
    if isinstance(obj, type):
        return [problem(
            "SR123",
            f"plugin {plugin!r} returned the class {obj.__name__} from {hook} for "
            f"{owner.name!r}, not an instance of it",
            accepted=f"an instance with every member of specreg.contract.protocols.{protocol.__name__}",
            fix=f"plugin authors: return an instance, e.g. `{obj.__name__}(...)`, from {hook}; "
            "users: report it to the plugin's authors",
            field=hook,
        )]
    missing = missing_members(obj, protocol)
    if not missing:
        return []
    return [problem(
        "SR123",
        f"plugin {plugin!r} returned {type(obj).__name__} from {hook}, which breaks "
        f"{protocol.__name__}: missing or mismatched {', '.join(missing)}",
        accepted=f"an object with every member of specreg.contract.protocols.{protocol.__name__}",
        fix=f"plugin authors: give {type(obj).__name__} the members listed (the hook "
        "reference's per-step contract shows each signature); users: report it to the "
        "plugin's authors",
        field=hook,
    )]


def sized_problems(
    role: str, obj: Any, plugin: str | None, algorithm: AlgorithmSpec, resolution: Resolution,
) -> list[Problem]:
    """SR126 when the verifier or drafter was built for other sizes than the plan's: a
    drafter's gamma (a tree drafter's num_draft_tokens), a verifier's num_draft_tokens and the
    widths it accepts."""
    width = resolution.target[Phase.TARGET_VERIFY]
    wanted: Mapping[str, Any]
    if role == "drafter":
        wanted = ({"num_draft_tokens": width} if algorithm.drafting == "tree"
                  else {"gamma": resolution.gamma})
    else:
        wanted = {"num_draft_tokens": width}
    wrong = [
        f"{name} {getattr(obj, name)!r}, the plan's {value}"
        for name, value in wanted.items()
        if is_int(getattr(obj, name, None)) and getattr(obj, name) != value
    ]
    accepts = getattr(obj, "widths", None)
    if role == "verifier" and isinstance(accepts, (tuple, list)) and accepts:
        needed = sorted({s.verify_width for s in (resolution.main, *(c.sizes for c in resolution.candidates))})
        absent = [w for w in needed if w not in accepts]
        if absent:
            wrong.append(f"widths {list(accepts)} lack {absent}, the config's and its "
                         "candidates' target_verify widths")
    if not wrong:
        return []
    hook = f"specreg_make_{role}"
    return [problem(
        "SR126",
        f"plugin {plugin!r} built the {role} {type(obj).__name__} of {algorithm.name!r} for "
        f"other sizes than the plan's: {'; '.join(wrong)}",
        accepted=f"a {role} built from the resolution: gamma {resolution.gamma}, target_verify "
        f"width {width}",
        fix=f"plugin authors: in {hook} take the sizes from the resolution argument "
        "(resolution.gamma, resolution.target[Phase.TARGET_VERIFY], the widths of "
        "resolution.configs()) rather than numbers of your own; users: report it to the "
        "plugin's authors",
        field=hook,
    )]


def verify_mode_problems(config: SpecConfig, algorithm: str, verifier: Any) -> list[Problem]:
    """SR133 when the config asks for the invariant verify mode and the plan's verifier does
    not run it (it does not say `verify_mode == 'invariant'`): running the standard rule instead
    would be a silent fallback."""
    if config.verify_mode != "invariant" or getattr(verifier, "verify_mode", None) == "invariant":
        return []
    return [problem(
        "SR133",
        f"{algorithm}: the plan's verifier ({type(verifier).__name__}) does not run the "
        "invariant verify mode",
        accepted="a verifier built with the config's verify_mode (specreg's ChainVerifier, "
        "BlockVerifier, LookupVerifier, TreeVerifier and EagleVerifier take it)",
        fix="leave verify_mode unset for this algorithm; plugin authors: pass "
        "config.verify_mode to the verifier specreg_make_verifier returns, and set its "
        "verify_mode attribute",
        field="verify_mode",
    )]
