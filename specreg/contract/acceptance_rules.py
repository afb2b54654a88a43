"""`AcceptanceRule`: the opt-in, lossy acceptance rules a plan's verifiers may use instead of the lossless one.

The default rule is lossless speculative sampling (every field at its default). Three lossy
families trade the target distribution for longer accepted runs, or fix acceptance outright:

- relaxed thresholds (SGLang's `--speculative-accept-threshold-single` /
  `--speculative-accept-threshold-acc`, `tree_speculative_sampling_target_only`): draft x is
  accepted when `coin * q(x) * threshold_acc < p(x)` (q(x) = 1 for the target-only rule) or
  `p(x) >= threshold_single`; on rejection the correction is drawn as the lossless rule draws it.
  (1.0, 1.0) is the lossless rule itself: the plan then runs the lossless kernels unchanged.
- typical acceptance (Medusa; vLLM's TypicalAcceptanceSampler,
  `typical_acceptance_sampler_posterior_threshold` / `_alpha`): x is accepted when
  `p(x) > min(posterior_threshold, posterior_alpha * exp(-H(p)))`, H the entropy of the target
  row; the token after the accepted run is the target's argmax at a rejection, a draw from p
  when every draft was accepted.
- synthetic acceptance, for benchmarks (vLLM's `synthetic_acceptance_rates` /
  `synthetic_acceptance_length`; SGLang's `SGLANG_SIMULATE_ACC_LEN`): the accepted count does not
  depend on the drafts at all. `synthetic_rates[i]` is the chance that a request accepts more
  than i drafts (non-increasing, one per draft position; one coin per request counts the rates
  it falls under); `synthetic_length` is the emitted tokens per step, bonus included (accepted
  drafts = length - 1; with `synthetic_method` 'match-expected', SGLang's, a fractional part is a
  Bernoulli between floor and ceil; with 'multinomial', SGLang's default, the emitted length is
  round(Normal(length, 1)) clamped to [1, gamma + 1], in distribution). The token after the run
  is drawn from p (argmax for greedy verification).

Everything here is torch-free: `SpecConfig.acceptance` holds an `AcceptanceRule`, the
translation reads the framework spellings with `acceptance_fields`, and `problems` reports
every range error at once, naming the spelling the user wrote.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import attrs

from specreg.errors import Problem, problem

#: vLLM's TypicalAcceptanceSampler defaults, taken when only one of the two is given.
TYPICAL_DEFAULTS = (0.09, 0.3)
#: SGLang's SGLANG_SIMULATE_ACC_METHOD values (the first is specreg's default).
SYNTHETIC_METHODS = ("match-expected", "multinomial")
#: Kinds, in the order `kind` reports them.
KINDS = ("lossless", "relaxed_thresholds", "typical", "synthetic")
#: Framework spellings -> AcceptanceRule field (SGLang flags, vLLM speculative-config keys).
FRAMEWORK_SPELLINGS: Mapping[str, str] = MappingProxyType({
    "speculative_accept_threshold_single": "threshold_single",
    "speculative_accept_threshold_acc": "threshold_acc",
    "typical_acceptance_sampler_posterior_threshold": "posterior_threshold",
    "typical_acceptance_sampler_posterior_alpha": "posterior_alpha",
    "synthetic_acceptance_rates": "synthetic_rates",
    "synthetic_acceptance_length": "synthetic_length",
})
_SGLANG_KEYS = ("speculative_accept_threshold_single", "speculative_accept_threshold_acc")
_FIELDS = ("threshold_single", "threshold_acc", "posterior_threshold", "posterior_alpha",
           "synthetic_rates", "synthetic_length", "synthetic_method")


def _rates(value: Any) -> Any:
    if isinstance(value, (list, tuple)):
        return tuple(value)
    return value


def _spelling(key: str) -> str:
    return "--" + key.replace("_", "-") if key in _SGLANG_KEYS else f"'{key}'"


@attrs.frozen(kw_only=True)
class AcceptanceRule:
    """Which acceptance rule the plan's verifiers apply (module docstring); lossless by default.

    `spelled` maps a field to the spelling the user gave it (an SGLang flag, a vLLM key), so
    errors name the fix in the user's terms; it takes no part in equality.
    """

    threshold_single: float = 1.0
    threshold_acc: float = 1.0
    posterior_threshold: float | None = None
    posterior_alpha: float | None = None
    synthetic_rates: tuple[float, ...] | None = attrs.field(default=None, converter=_rates)
    synthetic_length: float | None = None
    synthetic_method: str = "match-expected"
    spelled: Mapping[str, str] = attrs.field(factory=dict, eq=False, hash=False, repr=False)

    # ------------------------------------------------------------------------------ kinds
    @property
    def typical(self) -> bool:
        return self.posterior_threshold is not None or self.posterior_alpha is not None

    @property
    def synthetic(self) -> bool:
        return self.synthetic_rates is not None or self.synthetic_length is not None

    @property
    def relaxed(self) -> bool:
        return (self.threshold_single, self.threshold_acc) != (1.0, 1.0)

    @property
    def kind(self) -> str:
        """'synthetic', 'typical', 'relaxed_thresholds' or 'lossless' (one rule at a time)."""
        if self.synthetic:
            return "synthetic"
        if self.typical:
            return "typical"
        return "relaxed_thresholds" if self.relaxed else "lossless"

    @property
    def lossy(self) -> bool:
        """Whether verification under this rule emits anything but the target distribution."""
        return self.kind != "lossless"

    def typical_params(self) -> tuple[float, float]:
        """(posterior_threshold, posterior_alpha), vLLM's default for the one not given."""
        thr, alpha = self.posterior_threshold, self.posterior_alpha
        return (TYPICAL_DEFAULTS[0] if thr is None else float(thr),
                TYPICAL_DEFAULTS[1] if alpha is None else float(alpha))

    def to_dict(self) -> dict[str, Any]:
        """The fields that differ from the lossless default ({} for it)."""
        out: dict[str, Any] = {}
        for name in _FIELDS:
            value = getattr(self, name)
            if value != getattr(LOSSLESS, name):
                out[name] = list(value) if isinstance(value, tuple) else value
        return out

    def describe(self) -> str:
        body = ", ".join(f"{k}={v}" for k, v in self.to_dict().items())
        if not self.lossy:
            return "lossless"
        return f"LOSSY {self.kind} ({body}): the output is not the target distribution"

    # ----------------------------------------------------------------------------- checks
    def _where(self, name: str) -> str:
        return self.spelled.get(name, f"acceptance.{name}")

    def problems(self, gamma: int | None = None) -> list[Problem]:
        """Every problem with the values (types, ranges, rules combined); with `gamma`, the
        synthetic rates' count and the synthetic length's upper bound are checked too."""
        out: list[Problem] = []
        numbers = {n: getattr(self, n) for n in _FIELDS
                   if n not in ("synthetic_rates", "synthetic_method")}
        for name, value in numbers.items():
            if value is not None and not _is_number(value):
                out.append(problem(
                    "SR197", f"{self._where(name)} must be a number, got {value!r}",
                    accepted="a finite number", fix=f"set {self._where(name)} to a number",
                    field=f"acceptance.{name}",
                ))
        if out:
            return out
        out += self._threshold_problems() + self._typical_problems()
        out += self._synthetic_problems(gamma)
        chosen = [k for k, on in (("relaxed thresholds", self.relaxed), ("typical", self.typical),
                                  ("synthetic", self.synthetic)) if on]
        if len(chosen) > 1:
            out.append(problem(
                "SR195", f"acceptance rules {' and '.join(chosen)} were both asked for",
                accepted="at most one lossy acceptance rule",
                fix="keep one: drop the others' settings ("
                + ", ".join(self._where(n) for n in self._given()) + ")",
                field="acceptance",
            ))
        return out

    def _given(self) -> list[str]:
        return [n for n in _FIELDS if getattr(self, n) != getattr(LOSSLESS, n)]

    def _range(self, name: str, ok: bool, accepted: str) -> list[Problem]:
        if ok:
            return []
        value = getattr(self, name)
        return [problem(
            "SR192" if name.startswith("threshold") else "SR193",
            f"{self._where(name)} {value!r} is out of range", accepted=accepted,
            fix=f"set {self._where(name)} within {accepted} (1.0 keeps the lossless rule)"
            if name.startswith("threshold") else f"set {self._where(name)} within {accepted}",
            field=f"acceptance.{name}",
        )]

    def _threshold_problems(self) -> list[Problem]:
        return (self._range("threshold_single", 0.0 <= self.threshold_single <= 1.0, "[0, 1]")
                + self._range("threshold_acc", 0.0 < self.threshold_acc <= 1.0, "(0, 1]"))

    def _typical_problems(self) -> list[Problem]:
        out: list[Problem] = []
        if self.posterior_threshold is not None:
            out += self._range("posterior_threshold", 0.0 < self.posterior_threshold <= 1.0,
                               "(0, 1]")
        if self.posterior_alpha is not None:
            out += self._range("posterior_alpha", 0.0 <= self.posterior_alpha < math.inf,
                               "[0, inf)")
        return out

    def _synthetic_problems(self, gamma: int | None) -> list[Problem]:
        out: list[Problem] = []
        rates, length = self.synthetic_rates, self.synthetic_length
        if rates is not None and length is not None:
            out.append(self._synthetic(
                "both synthetic rates and a synthetic length were given",
                "exactly one of them", "synthetic_length"))
        if rates is not None:
            good = isinstance(rates, tuple) and all(_is_number(r) and 0 <= r <= 1 for r in rates)
            if not good or not rates:
                out.append(self._synthetic(
                    f"{self._where('synthetic_rates')} {rates!r} is not a list of numbers in "
                    "[0, 1]", "one rate in [0, 1] per draft position", "synthetic_rates"))
            elif any(b > a for a, b in zip(rates, rates[1:], strict=False)):
                out.append(self._synthetic(
                    f"{self._where('synthetic_rates')} {list(rates)} increases; rate i is the "
                    "chance of accepting more than i drafts, so it cannot grow with i",
                    "non-increasing rates", "synthetic_rates"))
            elif gamma is not None and len(rates) != gamma:
                out.append(self._synthetic(
                    f"{self._where('synthetic_rates')} has {len(rates)} rates for "
                    f"{gamma} draft positions", f"exactly {gamma} rates (one per draft)",
                    "synthetic_rates"))
        if self.synthetic_method not in SYNTHETIC_METHODS:
            out.append(self._synthetic(
                f"{self._where('synthetic_method')} {self.synthetic_method!r} is not a method",
                " or ".join(SYNTHETIC_METHODS), "synthetic_method"))
        elif self.synthetic_method != SYNTHETIC_METHODS[0] and length is None:
            out.append(self._synthetic(
                f"{self._where('synthetic_method')} applies to a synthetic length, and none is "
                "given", "synthetic_length with synthetic_method", "synthetic_length"))
        if length is not None:
            top = math.inf if gamma is None else gamma + 1
            if not 1 <= length <= top:
                bound = "[1, gamma + 1]" if gamma is None else f"[1, {gamma + 1}]"
                out.append(self._synthetic(
                    f"{self._where('synthetic_length')} {length!r} is out of range (tokens "
                    "emitted per step, the bonus included)", bound, "synthetic_length"))
        return out

    def _synthetic(self, message: str, accepted: str, name: str) -> Problem:
        return problem("SR194", message, accepted=accepted,
                       fix=f"give {self._where(name)} as {accepted}",
                       field=f"acceptance.{name}")


LOSSLESS = AcceptanceRule()


def _is_number(value: Any) -> bool:
    return (isinstance(value, (int, float)) and not isinstance(value, bool)
            and math.isfinite(value))


def _number(value: Any) -> Any:
    if isinstance(value, str):
        try:
            return float(value)
        except ValueError:
            return value
    return value


def rule_of(value: Any) -> Any:
    """`SpecConfig.acceptance`'s converter: None -> lossless; a mapping of field names (a
    framework spelling too) -> the rule; an `AcceptanceRule` as is. Anything else is left for
    `SpecConfig.type_problems` to report."""
    if value is None:
        return LOSSLESS
    if isinstance(value, AcceptanceRule) or not isinstance(value, Mapping):
        return value
    kwargs: dict[str, Any] = {}
    spelled = dict(value.get("spelled", {}))
    for raw, item in value.items():
        key = str(raw).lstrip("-").replace("-", "_")
        if key == "spelled":
            continue
        name = FRAMEWORK_SPELLINGS.get(key, key)
        if name != key:
            spelled[name] = _spelling(key)
        if name not in _FIELDS:
            return value  # an unknown key: reported by unknown_keys
        kwargs[name] = (_rates(item) if name == "synthetic_rates" else
                        item if name == "synthetic_method" else _number(item))
    return AcceptanceRule(**kwargs, spelled=spelled)


def unknown_keys(value: Any) -> list[Problem]:
    """SR197 for a value `rule_of` could not read (not a mapping, unknown keys)."""
    if isinstance(value, AcceptanceRule):
        return []
    if not isinstance(value, Mapping):
        return [problem("SR197", f"acceptance must be a mapping, got {type(value).__name__}",
                        accepted="a dict such as {'threshold_acc': 0.5}",
                        fix="pass acceptance as a dict of rule fields", field="acceptance")]
    known = set(_FIELDS) | set(FRAMEWORK_SPELLINGS) | {"spelled"}
    bad = sorted(str(k) for k in value if str(k).lstrip("-").replace("-", "_") not in known)
    return [problem("SR197", f"acceptance has unknown key(s) {bad}", accepted=", ".join(_FIELDS),
                    fix="rename or remove the key(s)", field="acceptance")]


def acceptance_fields(raw: Mapping[str, Any], fields: dict[str, Any], base: Any = None) -> None:
    """The translation's step: framework spellings in `raw` (keys already normalised) become
    `fields['acceptance']`, merged over `base` (an `acceptance` mapping given as a field)."""
    given = {k: raw[k] for k in FRAMEWORK_SPELLINGS if raw.get(k) is not None}
    if given:
        fields["acceptance"] = {**(dict(base) if isinstance(base, Mapping) else {}), **given}


def lossy_notice(rule: AcceptanceRule) -> list[Problem]:
    """SR191 (a warning) when `rule` is lossy: what `specreg check` and the plan's notices say."""
    if not isinstance(rule, AcceptanceRule) or not rule.lossy:
        return []
    given = ", ".join(rule._where(n) for n in rule._given())
    return [problem(
        "SR191", f"acceptance is {rule.describe()}",
        accepted="lossless verification (the defaults) for production outputs",
        fix=f"drop {given} for outputs distributed as the target model's",
        field="acceptance", severity="warning",
    )]

