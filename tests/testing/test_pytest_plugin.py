"""specreg's pytest plugin as a plugin author's suite meets it: the entry point `pytest11` loads
it into this very session, so its fixtures are requested here exactly as in an author's tests."""

from __future__ import annotations

import pytest

from specreg import hookimpl
from specreg.testing import ConformanceError
from tests.support.plugins import SpecPlugin


class Chatty(SpecPlugin):
    """An in-process plugin that registers one small chain algorithm and nothing else."""

    algorithms = ("chatty",)


def test_the_registry_fixture_loads_every_entry_point_without_a_marker(specreg_registry):
    names = {spec.name for spec in specreg_registry.algorithms()}
    assert {"eagle", "dspark", "ngram", "suffix", "medusa", "draft_model"} <= names
    assert not specreg_registry.shared  # a fresh registry, not the process-wide one


@pytest.mark.specreg_plugins("lookup")
def test_the_marker_limits_the_registry_to_the_named_entry_points(specreg_registry):
    names = {spec.name for spec in specreg_registry.algorithms()}
    assert {"ngram", "suffix"} <= names
    assert "eagle" not in names and "dspark" not in names
    assert {info.name for info in specreg_registry.plugins()} == {"lookup", "specreg.default"}


def test_the_factory_registers_in_process_plugins_and_named_entry_points(specreg_registry_factory):
    alone = specreg_registry_factory(Chatty())
    assert [spec.name for spec in alone.algorithms()] == ["chatty"]
    beside = specreg_registry_factory(Chatty(), entry_points=["lookup"])
    assert {"chatty", "ngram", "suffix"} <= {spec.name for spec in beside.algorithms()}
    assert "eagle" not in {spec.name for spec in beside.algorithms()}


class Broken(SpecPlugin):
    """A plugin whose registration hook raises: the registry refuses it (SR114)."""

    @hookimpl
    def specreg_register_algorithms(self, register):
        raise RuntimeError("broken on purpose")


def test_the_factory_fails_the_test_when_a_plugin_is_refused(specreg_registry_factory):
    """Negative control: a refused plugin fails the fixture's call, naming the refusal."""
    with pytest.raises(AssertionError, match="was refused.*SR114"):
        specreg_registry_factory(Chatty(), Broken())


@pytest.mark.specreg_plugins("lookup")
def test_the_conformance_fixture_runs_the_kit(specreg_registry, specreg_conformance):
    report = specreg_conformance.check_algorithm(specreg_registry, "ngram", lossless=False)
    assert report.clauses and all(clause.passed for clause in report.clauses)
    with pytest.raises(ConformanceError):
        specreg_conformance.check_algorithm(specreg_registry_with_liar(specreg_registry), "liar",
                                            lossless=False)


def specreg_registry_with_liar(registry):
    """`registry` plus a plugin whose draft_decode width is 0: the kit must fail it."""

    class Liar(SpecPlugin):
        algorithms = ("liar",)

        @hookimpl
        def specreg_num_tokens_per_req(self, algorithm, phase):
            return 0 if algorithm.name == "liar" and phase == "draft_decode" else None

    registry.register_plugin(Liar(), "liar")
    return registry
