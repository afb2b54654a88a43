"""Tiny plugins loaded by the consistency workers through a test-only entry-point group."""

from __future__ import annotations

from specreg import AlgorithmSpec, hookimpl


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


class ToyPlugin:
    """Registers the chain algorithm `toy` and builds a verifier without importing kernels."""

    @hookimpl
    def specreg_register_algorithms(self, register):
        register(
            AlgorithmSpec(
                name="toy", drafting="chain", verify_rules=("greedy",), owns_draft_kv=False
            )
        )

    @hookimpl
    def specreg_make_verifier(self, algorithm):
        return _Verifier() if algorithm.name == "toy" else None


class ExtraPlugin:
    """Registers a second algorithm; present on some ranks only."""

    @hookimpl
    def specreg_register_algorithms(self, register):
        register(AlgorithmSpec(name="extra", drafting="chain", verify_rules=("greedy",)))


toy = ToyPlugin()
extra = ExtraPlugin()
