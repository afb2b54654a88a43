import pytest

from specreg import ConfigError, Phase, UnknownPhaseError
from specreg.catalog import lookup


@pytest.mark.parametrize(
    "text, expected",
    [
        ("target_verify", Phase.TARGET_VERIFY),
        ("TARGET_VERIFY", Phase.TARGET_VERIFY),
        ("target-verify", Phase.TARGET_VERIFY),
        ("Draft-Decode", Phase.DRAFT_DECODE),
        (" draft_extend ", Phase.DRAFT_EXTEND),
        (Phase.DRAFT_EXTEND, Phase.DRAFT_EXTEND),
    ],
)
def test_parse_accepts_any_case_and_dashes(text, expected):
    assert Phase.parse(text) is expected


@pytest.mark.parametrize(
    "text, suggestion",
    [("target-verfy", "target_verify"), ("draft_decod", "draft_decode"), ("draftextend", "draft_extend")],
)
def test_unknown_phase_names_the_closest(text, suggestion):
    with pytest.raises(UnknownPhaseError) as info:
        Phase.parse(text)
    err = info.value
    assert err.code == "SR100"
    assert f"Did you mean '{suggestion}'" in str(err)
    for phase in Phase:
        assert phase.value in str(err)
    assert "Fix:" in str(err)


@pytest.mark.parametrize("value", ["decode", "", "verify", 3, None])
def test_unknown_phase_is_a_value_error_with_the_seed_code(value):
    with pytest.raises(ValueError) as info:
        Phase.parse(value)
    assert isinstance(info.value, ConfigError)
    assert info.value.code == "SR100"
    assert lookup("SR100").seed


def test_phase_keys_interchange_with_strings():
    table = {"target_verify": 1}
    assert table[Phase.TARGET_VERIFY] == 1
    assert {Phase.DRAFT_DECODE: 2}["draft_decode"] == 2
    assert str(Phase.DRAFT_EXTEND) == "draft_extend"
