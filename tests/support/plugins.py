"""The toy plugins the tests register, defined once: a plugin that registers the algorithm (and
cache) specs it is given, the small chain spec most of them register, a stand-in verifier for
tree specs, and the consistency workers' entry-point plugins.

A test that needs one more hook subclasses `SpecPlugin`, sets `algorithms` and adds the hook; a
plain string in `algorithms` stands for `small_chain_spec(name)`. A tree algorithm needs a
verifier of its plugin's (resolve refuses it without one, SR124): `TreeVerifierStand` adds one.
"""

from __future__ import annotations

from specreg import AlgorithmSpec, CacheSpec, ParamRange, Phase, hookimpl


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


class StandInTreeVerifier:
    """The tree verifier protocol's shape, sized for a resolution; the tests that hold one never
    verify with it."""

    rules = ("tree_greedy",)

    def __init__(self, resolution) -> None:
        self.num_draft_tokens = resolution.target[Phase.TARGET_VERIFY]
        sizes = (resolution.main, *(c.sizes for c in resolution.candidates))
        self.widths = tuple(sorted({s.verify_width for s in sizes}))

    def verify_greedy(self, tree, target_logits=None, *, draft_lengths=None):
        raise NotImplementedError

    def verify_sampling(self, tree, target_probs, *, draft_probs=None, **kwargs):
        raise NotImplementedError

    def describe(self) -> str:
        return "stand-in tree verifier"


class TreeVerifierStand:
    """Mixed into a `SpecPlugin`: builds a `StandInTreeVerifier` for its tree algorithms."""

    @hookimpl
    def specreg_make_verifier(self, algorithm, resolution):
        trees = {s.name for s in self.algorithms if isinstance(s, AlgorithmSpec) and s.drafting == "tree"}
        return StandInTreeVerifier(resolution) if algorithm.name in trees else None


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


# ------------------------------------------------ the consistency workers' plugins (tests/registry)
class _Verifier:
    """Stands in for a kernel object (the chain verifier protocol's shape, no kernels), sized
    for the plan's verify width; the consistency check never calls it."""

    rules = ("greedy",)

    def __init__(self, num_draft_tokens: int = 4) -> None:
        self.num_draft_tokens = num_draft_tokens
        self.widths = (num_draft_tokens,)

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
    def specreg_make_verifier(self, algorithm, resolution):
        if algorithm.name != "toy":
            return None
        return _Verifier(resolution.target[Phase.TARGET_VERIFY])


class ExtraPlugin(SpecPlugin):
    """Registers a second algorithm; present on some ranks only."""

    algorithms = (AlgorithmSpec(name="extra", drafting="chain", verify_rules=("greedy",)),)


#: The entry points of the consistency test's distribution (tests/registry/test_distributed.py).
toy = ToyPlugin()
extra = ExtraPlugin()
