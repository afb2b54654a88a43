"""What a plugin may register (specreg/registry/registration_checks.py): hooks that match specreg's
specifications under a free name, or a coded refusal that leaves the manager as it was."""

from __future__ import annotations

import pluggy

from specreg import hookimpl, hookspecs
from specreg.registry.tables import hook_names
from specreg.registry.registration_checks import (
    name_conflict,
    register_checked,
    shared_registry_change,
    wrong_spec_type,
)


def _manager() -> pluggy.PluginManager:
    pm = pluggy.PluginManager(hookspecs.PROJECT_NAME)
    pm.add_hookspecs(hookspecs)
    return pm


class Good:
    @hookimpl
    def specreg_register_algorithms(self, register):
        return None


class Misspelt:
    @hookimpl
    def specreg_register_algorithm(self, register):  # no such hook
        return None


class BadArgs:
    @hookimpl
    def specreg_register_algorithms(self, register, nonsense):
        return None


class MisspeltDrafter:
    @hookimpl
    def specreg_make_drafer(self, config, algorithm):  # a letter short of specreg_make_drafter
        return None


class MisspeltArgument:
    @hookimpl
    def specreg_resolve_gamma(self, config, algoritm):  # a letter short of algorithm
        return None


def test_a_sound_plugin_registers():
    pm = _manager()
    assert register_checked(pm, Good(), "good", hook_names()) is None
    assert pm.has_plugin("good")


def test_a_hook_no_specification_has_is_sr111_and_the_plugin_is_removed():
    pm = _manager()
    found = register_checked(pm, Misspelt(), "misspelt", hook_names())
    assert found.code == "SR111" and "specreg_register_algorithm" in found.message
    assert "specreg_register_algorithms" in found.accepted
    assert not pm.has_plugin("misspelt")


def test_a_hook_with_unknown_arguments_is_sr111():
    pm = _manager()
    found = register_checked(pm, BadArgs(), "badargs", hook_names())
    assert found.code == "SR111" and not pm.has_plugin("badargs")


def test_a_misspelt_hook_is_named_with_the_hook_it_is_closest_to():
    found = register_checked(_manager(), MisspeltDrafter(), "typo", hook_names())
    assert found.code == "SR111"
    assert "Did you mean specreg_make_drafter?" in found.message
    assert found.fix == "rename specreg_make_drafer to specreg_make_drafter"


def test_a_misspelt_argument_is_named_with_the_argument_it_is_closest_to():
    found = register_checked(_manager(), MisspeltArgument(), "typo", hook_names())
    assert found.code == "SR111"
    assert "Did you mean 'algorithm' (for 'algoritm' in specreg_resolve_gamma)?" in found.message


def test_a_taken_name_is_sr112():
    pm = _manager()
    assert register_checked(pm, Good(), "same", hook_names()) is None
    found = register_checked(pm, Good(), "same", hook_names())
    assert found.code == "SR112" and "'same' is already registered" in found.message


def test_the_refusal_texts_name_the_cause_and_the_fix():
    assert wrong_spec_type("p", 3, "algorithm", dict).code == "SR113"
    conflict = name_conflict("cache", "paged", ["'a' (x 1)", "'b' (y 2)"])
    assert conflict.code == "SR112" and "'a' (x 1) and 'b' (y 2)" in conflict.message
    assert "override=True" in conflict.fix and conflict.field == "cache"
    assert "Registry.load(fresh=True)" in shared_registry_change("register_plugin").fix
