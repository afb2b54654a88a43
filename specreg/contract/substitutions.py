"""The runtime substitutions: framework seams where specreg runs its code in place of the framework's.

Plain data only (no framework, torch or triton import). Plugins register each `Substitution`
through `specreg_register_substitutions` (specreg's default plugin registers the core adapters'
own); a registry keeps what its plugins registered as plain data, `registry.substitutions()`,
a mapping from name to `Substitution` that the functions here take as `table`: the names a
config's `substitutions` field and the adapters' `SPECREG_SGLANG_SUBSTITUTE` /
`SPECREG_VLLM_SUBSTITUTE` switches accept, and what each changes.
`specreg.adapters.substitution_runtime` calls a substitution's installer inside the framework's
process, never at `import specreg`.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping
from typing import Any

import attrs

from specreg._suggest import did_you_mean
from specreg.errors import Problem, problem

#: The switch of each framework's substitutions, read when that framework's adapter is on.
SWITCHES = {"sglang": "SPECREG_SGLANG_SUBSTITUTE", "vllm": "SPECREG_VLLM_SUBSTITUTE"}
#: Switch words that are not names: "all" (every one of the framework's) and the off values.
RESERVED_WORDS = ("all", "off", "none", "0", "false", "no")
_NAME = re.compile(r"^[a-z][a-z0-9_]*$")
_DOTTED = re.compile(r"^[A-Za-z_][\w.]*:[A-Za-z_]\w*$")


@attrs.frozen
class Substitution:
    """One framework seam specreg takes over when asked: its name, whose seam it is, what it
    changes for the user, and the installer that applies (and checks) its hooks.

    `installer` is called as ``installer(plan)`` inside the framework's process (``plan`` is the
    adapter's plan, or None when the adapter installs at plugin-load time): a callable, or a
    ``"module:function"`` string imported there, so that registering imports nothing heavy.
    """

    name: str
    framework: str  # "sglang" or "vllm"
    summary: str
    installer: Callable[[Any], None] | str

    @property
    def where(self) -> str:
        """The installer as ``module:function``, for messages and the installed record."""
        if isinstance(self.installer, str):
            return self.installer
        module = getattr(self.installer, "__module__", None) or "?"
        return f"{module}:{getattr(self.installer, '__qualname__', repr(self.installer))}"


#: What a registry holds: every registered substitution by name.
Table = Mapping[str, Substitution]


def substitution_refusal(value: Any) -> str | None:
    """Why `value` cannot be registered as a runtime substitution (for SR129), or None."""
    if not isinstance(value, Substitution):
        return f"registered {type(value).__name__}, not a specreg Substitution"
    name = value.name
    if not isinstance(name, str) or not _NAME.match(name) or name in RESERVED_WORDS:
        return (f"substitution name {name!r} is not lower-case letters, digits and '_' "
                f"starting with a letter (and none of {', '.join(RESERVED_WORDS)})")
    if value.framework not in SWITCHES:
        return (f"substitution {name!r} names framework {value.framework!r}, not one of "
                f"{', '.join(SWITCHES)}")
    if not isinstance(value.summary, str) or not value.summary.strip():
        return f"substitution {name!r} has no summary saying what it changes"
    installer = value.installer
    if isinstance(installer, str) and not _DOTTED.match(installer):
        return f"substitution {name!r} has installer {installer!r}, not 'module:function'"
    if not isinstance(installer, str) and not callable(installer):
        return (f"substitution {name!r} has installer {installer!r}, neither a callable nor "
                "'module:function'")
    return None


def names_of(table: Table, framework: str | None = None) -> tuple[str, ...]:
    """The substitution names of `framework` ("sglang" or "vllm"), or of both, in `table`."""
    return tuple(sorted(n for n, s in table.items() if framework in (None, s.framework)))


def parse(
    text: str, table: Table, framework: str | None = None, flag: str | None = None
) -> tuple[tuple[str, ...], list[Problem]]:
    """The names a comma-separated switch value gives ("all": every one of `framework`'s in
    `table`), and SR181 for each name that is not a substitution of `framework` (its fix names
    `flag`, the CLI's, when given, else the framework's environment variable)."""
    words = [w.strip().lower() for w in text.split(",") if w.strip()]
    if words in (["off"], ["none"], ["0"], ["false"], ["no"]):
        return (), []
    if "all" in words:
        words = [w for w in words if w != "all"] + list(names_of(table, framework))
    return normalise(words), problems_of(words, table, framework, flag)


def normalise(names: Iterable[str]) -> tuple[str, ...]:
    """Sorted and without repeats, so equal sets give equal configs (and plans)."""
    return tuple(sorted(set(names)))


def problems_of(
    names: Iterable[str], table: Table, framework: str | None = None, flag: str | None = None
) -> list[Problem]:
    """SR181 for every name that is not a substitution in `table` (of `framework`, when given)."""
    accepted = names_of(table, framework)
    where = {"sglang": "SGLang", "vllm": "vLLM"}.get(framework or "", "SGLang or vLLM")
    switch = SWITCHES.get(framework or "")
    out = []
    for name in names:
        if name in accepted:
            continue
        other = table.get(name)
        why = (f"{name!r} substitutes a {other.framework} seam, not a {where} one" if other
               else f"{name!r} is not a runtime substitution that a loaded plugin registered."
               f"{did_you_mean(name, accepted)}")
        out.append(problem(
            "SR181", why, accepted=", ".join(accepted) + ", or all",
            fix=(f"pass {flag} with names from {', '.join(accepted)}, or drop it" if flag else
                 f"export {switch}={','.join(accepted)} (or a subset), or unset it" if framework
                 else f"name substitutions from {', '.join(accepted)}, or leave it unset"),
            field="substitutions",
        ))
    return out
