"""The runtime substitutions: which of a framework's own kernels specreg can run in their place.

Plain data only (no framework, torch or triton import): the names a config's `substitutions`
field and the adapters' `SPECREG_SGLANG_SUBSTITUTE` / `SPECREG_VLLM_SUBSTITUTE` switches accept,
what each changes, and the dotted `module:function` that installs it inside the framework's
process (`specreg.adapters.substitution_runtime` imports it there, never at `import specreg`).
"""

from __future__ import annotations

from collections.abc import Iterable

import attrs

from specreg._suggest import did_you_mean
from specreg.errors import Problem, problem

#: The switch of each framework's substitutions, read when that framework's adapter is on.
SWITCHES = {"sglang": "SPECREG_SGLANG_SUBSTITUTE", "vllm": "SPECREG_VLLM_SUBSTITUTE"}


@attrs.frozen
class Substitution:
    """One framework seam specreg takes over when asked: its name, whose seam it is, what it
    changes for the user, and the installer that applies (and checks) its hooks."""

    name: str
    framework: str  # "sglang" or "vllm"
    summary: str
    installer: str  # "module:function", called as function(plan) inside the framework


SUBSTITUTIONS: dict[str, Substitution] = {
    s.name: s
    for s in (
        Substitution(
            "hisparse_swap", "sglang",
            "SGLang's HiSparseSpecSwapManager runs specreg's swapper: any number of draft tokens "
            "instead of 2-4, and no top_k limit",
            "specreg.adapters.sglang_hisparse:install",
        ),
        Substitution(
            "tree_verify", "sglang",
            "eagle_sample's greedy and sampling tree kernels (and the top-k/top-p renorm before "
            "them) are specreg's: min-p and per-request seeds added, and greedy verification runs "
            "on every platform",
            "specreg.adapters.sglang_tree_verify:install",
        ),
        Substitution(
            "rejection_sampler", "vllm",
            "vLLM's rejection sampler runs specreg's chain verifier: min_p and logit_bias are "
            "accepted with speculative decoding and applied at every verified position",
            "specreg.adapters.vllm_rejection:install",
        ),
    )
}


def names_of(framework: str | None = None) -> tuple[str, ...]:
    """The substitution names of `framework` ("sglang" or "vllm"), or of both."""
    return tuple(n for n, s in SUBSTITUTIONS.items() if framework in (None, s.framework))


def parse(
    text: str, framework: str | None = None, flag: str | None = None
) -> tuple[tuple[str, ...], list[Problem]]:
    """The names a comma-separated switch value gives ("all": every one of `framework`'s), and
    SR181 for each name that is not a substitution of `framework` (its fix names `flag`, the
    CLI's, when given, else the framework's environment variable)."""
    words = [w.strip().lower() for w in text.split(",") if w.strip()]
    if words in (["off"], ["none"], ["0"], ["false"], ["no"]):
        return (), []
    if "all" in words:
        words = [w for w in words if w != "all"] + list(names_of(framework))
    return normalise(words), problems_of(words, framework, flag)


def normalise(names: Iterable[str]) -> tuple[str, ...]:
    """Sorted and without repeats, so equal sets give equal configs (and plans)."""
    return tuple(sorted(set(names)))


def problems_of(
    names: Iterable[str], framework: str | None = None, flag: str | None = None
) -> list[Problem]:
    """SR181 for every name that is not a substitution (of `framework`, when given)."""
    accepted = names_of(framework)
    where = {"sglang": "SGLang", "vllm": "vLLM"}.get(framework or "", "SGLang or vLLM")
    switch = SWITCHES.get(framework or "", "SPECREG_SGLANG_SUBSTITUTE")
    out = []
    for name in names:
        if name in accepted:
            continue
        other = SUBSTITUTIONS.get(name)
        why = (f"{name!r} substitutes a {other.framework} seam, not a {where} one" if other
               else f"{name!r} is not a runtime substitution.{did_you_mean(name, accepted)}")
        out.append(problem(
            "SR181", why, accepted=", ".join(accepted) + ", or all",
            fix=(f"pass {flag} with names from {', '.join(accepted)}, or drop it" if flag else
                 f"export {switch}={','.join(accepted)} (or a subset), or unset it"),
            field="substitutions",
        ))
    return out
