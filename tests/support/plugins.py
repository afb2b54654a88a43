"""The toy plugins the tests register, defined once: a plugin that registers the algorithm (and
cache) specs it is given, the small chain spec most of them register, and the consistency
workers' entry-point plugins.

A test that needs one more hook subclasses `SpecPlugin`, sets `algorithms` and adds the hook; a
plain string in `algorithms` stands for `small_chain_spec(name)`.
"""

from __future__ import annotations

from specreg import AlgorithmSpec, CacheSpec, ParamRange, hookimpl


def small_chain_spec(name: str) -> AlgorithmSpec:
    """A greedy chain drafter verifying 2 to 6 tokens (default 3)."""
    return AlgorithmSpec(
        name=name, drafting="chain", verify_rules=("greedy",), num_draft_tokens=ParamRange(2, 6, 3)
    )


class SpecPlugin:
    """Registers its algorithm specs (a name: `small_chain_spec(name)`) and nothing else."""

    algorithms: tuple[AlgorithmSpec | str, ...] = ()

    def __init__(self, *algorithms: AlgorithmSpec | str) -> None:
        if algorithms:
            self.algorithms = algorithms

    @hookimpl
    def specreg_register_algorithms(self, register):
        for spec in self.algorithms:
            register(small_chain_spec(spec) if isinstance(spec, str) else spec)


class SpecAndCachePlugin(SpecPlugin):
    """Registers its algorithm specs and its cache specs."""

    caches: tuple[CacheSpec, ...] = ()

    def __init__(self, *algorithms: AlgorithmSpec | str, caches: tuple[CacheSpec, ...] = ()) -> None:
        super().__init__(*algorithms)
        if caches:
            self.caches = tuple(caches)

    @hookimpl
    def specreg_register_caches(self, register):
        for spec in self.caches:
            register(spec)


# ------------------------------------------------ the consistency workers' plugins (tests/core)
class _Verifier:
    """Stands in for a kernel object (the chain verifier protocol's shape, no kernels); the
    consistency check never calls it."""

    rules = ("greedy",)
    num_draft_tokens = 4
    widths = (4,)

    def verify_greedy(self, candidates, target_logits, *, verify_lens=None):
        raise NotImplementedError

    def verify_sampling(self, candidates, target_probs, draft_probs, **kwargs):
        raise NotImplementedError

    def describe(self) -> str:
        return "test verifier"


class ToyPlugin(SpecPlugin):
    """Registers the chain algorithm `toy` and builds a verifier without importing kernels."""

    algorithms = (
        AlgorithmSpec(name="toy", drafting="chain", verify_rules=("greedy",), owns_draft_kv=False),
    )

    @hookimpl
    def specreg_make_verifier(self, algorithm):
        return _Verifier() if algorithm.name == "toy" else None


class ExtraPlugin(SpecPlugin):
    """Registers a second algorithm; present on some ranks only."""

    algorithms = (AlgorithmSpec(name="extra", drafting="chain", verify_rules=("greedy",)),)


#: The entry points of the consistency test's distribution (tests/core/test_core_consistency.py).
toy = ToyPlugin()
extra = ExtraPlugin()
