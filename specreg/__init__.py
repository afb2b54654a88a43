"""specreg: one plugin registry for speculative-decoding algorithms and KV-cache backends.

Serving frameworks call `Registry.load()` once per process and `registry.resolve(config)` once per
configuration; the returned `SpecPlan` is queried every step with no plugin dispatch.
`import specreg` imports neither torch nor triton.
"""

from specreg.registry.compat import resolve_num_tokens_per_req
from specreg.contract.config import SpecConfig
from specreg.errors import (
    CacheMissError,
    ConfigError,
    ConsistencyError,
    KernelInputError,
    PluginError,
    Problem,
    SpecRegError,
    UnknownNameError,
    UnknownPhaseError,
    problem,
)
from specreg.hookspecs import hookimpl, hookspec
from specreg.contract.phase import Phase
from specreg.registry.plan import SpecPlan
from specreg.contract.protocols import VerifyResult
from specreg.registry.registry import PluginFailure, PluginInfo, Registry, RegistryCache
from specreg.contract.resolution import Candidate, Resolution, Sizes
from specreg.contract.specs import AlgorithmSpec, CacheSpec, ParamRange
from specreg.registry.translate import config_from_flags

__all__ = [
    "AlgorithmSpec",
    "Candidate",
    "CacheMissError",
    "CacheSpec",
    "ConfigError",
    "ConsistencyError",
    "KernelInputError",
    "ParamRange",
    "Phase",
    "PluginError",
    "PluginFailure",
    "PluginInfo",
    "Problem",
    "Registry",
    "RegistryCache",
    "Resolution",
    "SpecConfig",
    "SpecPlan",
    "SpecRegError",
    "Sizes",
    "UnknownNameError",
    "UnknownPhaseError",
    "VerifyResult",
    "config_from_flags",
    "hookimpl",
    "hookspec",
    "problem",
    "resolve_num_tokens_per_req",
]

__version__ = "0.1.0"
