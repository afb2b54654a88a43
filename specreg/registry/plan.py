"""`SpecPlan`: a resolved configuration that a serving loop queries every step.

Everything in a plan is plain data or a bound object built once at resolve time: its accessors
are dictionary lookups and attribute reads, never pluggy dispatch. The kernel backend asked for
(SPECREG_KERNEL_BACKEND) is read once, when the plan is resolved, and stored in it: what the
plan reports and fingerprints never changes with the environment afterwards.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import attrs

from specreg.backend import BACKEND_CHOICES, backend_for_device
from specreg.contract.memory import MemoryReport, plan_memory
from specreg.contract.phase import PHASES, Phase

if TYPE_CHECKING:
    from specreg.contract.config import SpecConfig
    from specreg.errors import Problem
    from specreg.registry.plugin_info import PluginInfo
    from specreg.contract.protocols import (
        BlockDrafterProtocol,
        CacheSwapperProtocol,
        ChainDrafterProtocol,
        ChainVerifierProtocol,
        TreeDrafterProtocol,
        TreeVerifierProtocol,
    )
    from specreg.contract.resolution import Candidate, Resolution
    from specreg.contract.specs import AlgorithmSpec, CacheSpec


@attrs.frozen(kw_only=True)
class SpecPlan:
    """The resolved plan for one config: widths, gamma, verifier, drafter and cache swapper.

    `num_tokens_per_req(phase, is_draft_worker=False)` costs one dictionary lookup. With
    adaptive `candidate_steps`, widths and gamma are the maxima over the config and every
    candidate (`candidates`), and the verifier, drafter and swapper are sized for them. The
    three objects satisfy the `specreg.contract.protocols` protocols of the algorithm's drafting style.
    `kernel_backend` is the backend asked for when it was resolved ('auto', 'torch' or
    'triton'); `kernel_backends()` and `fingerprint()` derive from it alone.
    """

    algorithm: AlgorithmSpec
    cache: CacheSpec | None
    resolution: Resolution
    verifier: ChainVerifierProtocol | TreeVerifierProtocol | None = attrs.field(eq=False)
    cache_swapper: CacheSwapperProtocol | None = attrs.field(eq=False)
    drafter: ChainDrafterProtocol | TreeDrafterProtocol | BlockDrafterProtocol | None = attrs.field(
        default=None, eq=False
    )
    notices: tuple[Problem, ...] = ()
    plugins: tuple[PluginInfo, ...] = ()
    kernel_backend: str = attrs.field(
        default="auto", validator=attrs.validators.in_(BACKEND_CHOICES)
    )
    gamma: int = attrs.field(init=False)
    _target: dict[str, int] = attrs.field(init=False, repr=False, eq=False)
    _draft: dict[str, int] = attrs.field(init=False, repr=False, eq=False)

    def __attrs_post_init__(self) -> None:
        # Keys are plain strings; Phase hashes and compares as its value, so both forms hit.
        object.__setattr__(self, "gamma", self.resolution.gamma)
        object.__setattr__(self, "_target", {p.value: w for p, w in self.resolution.target.items()})
        object.__setattr__(self, "_draft", {p.value: w for p, w in self.resolution.draft.items()})

    @property
    def config(self) -> SpecConfig:
        """The resolved config (every parameter filled in)."""
        return self.resolution.config

    @property
    def candidates(self) -> tuple[Candidate, ...]:
        """Every adaptive candidate (steps, config, sizes), in increasing steps; () if none."""
        return self.resolution.candidates

    def candidate(self, steps: int) -> Candidate:
        """The adaptive candidate of `steps` (KeyError when the plan has none for it)."""
        for found in self.resolution.candidates:
            if found.steps == steps:
                return found
        raise KeyError(f"no adaptive candidate with {steps} steps")

    @property
    def max_draft_length(self) -> int:
        """The largest per-request draft length (`specreg.step.draft_lengths`) a step may ask for:
        the deepest path the verifier walks (`num_steps` of a tree verifier, else gamma)."""
        if self.algorithm.drafting == "tree":
            return int(getattr(self.verifier, "num_steps", self.gamma))
        return self.gamma

    @property
    def lossy(self) -> bool:
        """Whether the plan's verifiers use a lossy acceptance rule (`specreg.contract.acceptance_rules`:
        relaxed thresholds, typical or synthetic acceptance), whose output is not the target
        distribution. False by default."""
        return self.config.acceptance.lossy

    def num_tokens_per_req(self, phase: Phase | str, is_draft_worker: bool = False) -> int:
        """The per-request token width of `phase` on the target (or draft) worker."""
        try:
            return (self._draft if is_draft_worker else self._target)[phase]
        except (KeyError, TypeError):
            return (self._draft if is_draft_worker else self._target)[Phase.parse(phase).value]

    def memory(self) -> MemoryReport:
        """The device and host bytes of every buffer the plan implies (nothing is allocated)."""
        return plan_memory(self)

    def kernel_backends(self) -> dict[str, str]:
        """Which kernel implementation runs for tensors on each device type, under the backend
        the plan was resolved with (SR116 when it cannot run there, e.g. a forced 'triton' on
        CPU tensors without Triton's interpreter)."""
        return {
            device: backend_for_device(device, requested=self.kernel_backend)
            for device in ("cpu", "cuda")
        }

    def fingerprint(self) -> dict[str, Any]:
        """What must agree across the ranks of one serving job."""
        return {
            "algorithm": self.algorithm.name,
            "cache": self.cache.name if self.cache else None,
            "plugins": sorted(f"{p.name}=={p.version}" for p in self.plugins),
            "gamma": self.gamma,
            "widths": self.resolution.widths_dict(),
            "kernel_backends": self.kernel_backends(),
            "substitutions": list(self.config.substitutions),
            "acceptance": self.config.acceptance.to_dict(),
        }

    def to_dict(self) -> dict[str, Any]:
        """The plan as JSON-ready data. `gamma` and `widths` size the buffers: with adaptive
        candidates they are the maxima over the config and every candidate, and `config_sizes`
        states the config's own gamma and widths beside them."""
        return {
            "algorithm": self.algorithm.name,
            "capabilities": self.algorithm.capabilities(),
            "cache": self.cache.name if self.cache else None,
            "config": self.config.to_dict(),
            "gamma": self.gamma,
            "widths": {
                worker: {p.value: self.num_tokens_per_req(p, worker == "draft") for p in PHASES}
                for worker in ("target", "draft")
            },
            "acceptance": {
                "rule": self.config.acceptance.kind, "lossy": self.lossy,
                **self.config.acceptance.to_dict(),
            },
            "verifier": _describe(self.verifier),
            "drafter": _describe(self.drafter),
            "cache_swapper": _describe(self.cache_swapper),
            "kernel_backends": self.kernel_backends(),
            "memory": self.memory().to_dict(),
            "notices": [n.render() for n in self.notices],
            "plugins": [p.to_dict() for p in self.plugins],
        } | (
            {
                "config_sizes": {
                    "gamma": self.resolution.main.gamma,
                    "widths": self.resolution.main.widths_dict(),
                },
                "candidates": [c.to_dict() for c in self.candidates],
            }
            if self.candidates
            else {}
        )


def _describe(obj: Any) -> str | None:
    if obj is None:
        return None
    describe = getattr(obj, "describe", None)
    return str(describe()) if callable(describe) else type(obj).__name__
