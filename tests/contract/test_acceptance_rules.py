"""The acceptance-rule config (specreg.contract.acceptance_rules): framework spellings reach the plan,
every range problem is reported at once with the framework's flag as the fix, a lossy rule is
named by plan.lossy, the plan's dict, `specreg check` and `specreg plan`, and the defaults are
lossless."""

import json

import pytest

from specreg import Registry
from specreg.contract.acceptance_rules import AcceptanceRule
from specreg.cli.command import main
from specreg.contract.config import SpecConfig
from specreg.errors import ConfigError
from specreg.registry.translate import config_from_flags


@pytest.fixture(scope="module")
def registry():
    return Registry.load()


def test_defaults_are_lossless_and_leave_the_config_dict_unchanged(registry):
    plan = registry.resolve({"algorithm": "eagle"})
    assert not plan.lossy and plan.config.acceptance == AcceptanceRule()
    assert "acceptance" not in plan.config.to_dict()
    assert plan.to_dict()["acceptance"] == {"rule": "lossless", "lossy": False}
    sglang = config_from_flags({"speculative_algorithm": "EAGLE",
                                "speculative_accept_threshold_single": 1.0,
                                "speculative_accept_threshold_acc": "1.0"})
    assert sglang.acceptance == AcceptanceRule() and not sglang.acceptance.lossy


def test_sglang_thresholds_reach_the_eagle_tree_kernel(registry):
    plan = registry.resolve({"speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
                             "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8,
                             "speculative_accept_threshold_single": "0.6",
                             "speculative_accept_threshold_acc": 0.5})
    assert plan.lossy
    assert (plan.verifier.threshold_single, plan.verifier.threshold_acc) == (0.6, 0.5)
    assert plan.to_dict()["acceptance"] == {"rule": "relaxed_thresholds", "lossy": True,
                                            "threshold_single": 0.6, "threshold_acc": 0.5}
    assert any(n.code == "SR191" for n in plan.notices)
    again = registry.resolve(plan.config.to_dict())  # a plan's own config gives the same plan
    assert again.config.acceptance == plan.config.acceptance and again.lossy


def test_vllm_keys_reach_the_chain_verifiers(registry):
    typical = registry.resolve({"method": "eagle", "num_speculative_tokens": 3,
                                "typical_acceptance_sampler_posterior_threshold": 0.2})
    assert typical.config.acceptance.typical_params() == (0.2, 0.3)  # vLLM's alpha default
    synthetic = registry.resolve({"method": "eagle", "num_speculative_tokens": 3,
                                  "synthetic_acceptance_rates": [0.9, 0.5, 0.1]})
    assert synthetic.lossy and "synthetic" in synthetic.verifier.describe()
    for algorithm in ("dflash", "ngram", "draft_model"):
        found = registry.check({"algorithm": algorithm, "num_draft_tokens": 4,
                                "acceptance": {"synthetic_length": 2}})
        assert [p.code for p in found if p.code.startswith("SR19")] == ["SR191"], found


def test_every_range_problem_is_reported_at_once_with_the_flag_to_fix():
    with pytest.raises(ConfigError) as info:
        config_from_flags({"speculative_algorithm": "EAGLE",
                           "speculative_accept_threshold_single": 1.5,
                           "speculative_accept_threshold_acc": 0,
                           "num_steps": "x"})
    codes = info.value.codes
    assert codes.count("SR192") == 2 and "SR104" in codes
    rendered = str(info.value)
    assert "--speculative-accept-threshold-single" in rendered
    assert "--speculative-accept-threshold-acc" in rendered
    with pytest.raises(ConfigError) as info:
        SpecConfig(algorithm="eagle", acceptance={"posterior_threshold": 2, "posterior_alpha": -1,
                                                  "synthetic_rates": [0.2, 0.5]})
    assert sorted(info.value.codes) == ["SR193", "SR193", "SR194", "SR195"]
    for method in ({"synthetic_method": "normal", "synthetic_length": 2},
                   {"synthetic_method": "multinomial"}):
        with pytest.raises(ConfigError) as info:
            SpecConfig(algorithm="eagle", acceptance=method)
        assert info.value.codes == ("SR194",)
    with pytest.raises(ConfigError) as info:
        SpecConfig(algorithm="eagle", acceptance={"threshold": 0.5})
    assert info.value.codes == ("SR197",)
    with pytest.raises(ConfigError) as info:
        SpecConfig(algorithm="eagle", acceptance={"threshold_acc": "low"})
    assert info.value.codes == ("SR197",)


def test_gamma_dependent_synthetic_checks(registry):
    found = registry.check({"method": "eagle", "num_speculative_tokens": 3,
                            "synthetic_acceptance_rates": [0.9, 0.5]})
    assert [p.code for p in found if p.is_error] == ["SR194"]
    assert "'synthetic_acceptance_rates'" in found[0].message
    found = registry.check({"method": "eagle", "num_speculative_tokens": 3,
                            "synthetic_acceptance_length": 5})
    assert [p.code for p in found if p.is_error] == ["SR194"]
    found = registry.check({"speculative_algorithm": "EAGLE", "speculative_num_steps": 3,
                            "speculative_eagle_topk": 4, "speculative_num_draft_tokens": 8,
                            "acceptance": {"synthetic_length": 2}})
    assert [p.code for p in found if p.is_error] == ["SR315"]
    medusa = {"algorithm": "medusa", "acceptance": {"posterior_threshold": 0.1}}
    assert [p.code for p in registry.check(medusa) if p.is_error] == ["SR198"]
    with pytest.raises(ConfigError) as info:  # check and resolve agree
        registry.resolve(medusa)
    assert info.value.codes == ("SR198",)
    assert registry.resolve({**medusa, "topk": 1}).lossy


def test_check_and_plan_name_a_lossy_rule(capsys):
    flags = ["--speculative-algorithm", "EAGLE", "--speculative-accept-threshold-acc", "0.5"]
    assert main(["check", *flags]) == 0
    out = capsys.readouterr().out
    assert "warning: [SR191]" in out and "LOSSY relaxed_thresholds" in out
    assert main(["plan", *flags]) == 0
    out = capsys.readouterr().out
    assert "acceptance     LOSSY relaxed_thresholds (threshold_acc=0.5)" in out
    assert main(["plan", "--speculative-algorithm", "EAGLE", "--json"]) == 0
    assert json.loads(capsys.readouterr().out)["acceptance"]["lossy"] is False
    assert main(["check", *flags[:2], "--speculative-accept-threshold-acc", "7"]) != 0
    assert "[SR192] --speculative-accept-threshold-acc 7.0 is out of range" in capsys.readouterr().out


def test_the_sglang_adapter_passes_the_thresholds_through(registry):
    from types import SimpleNamespace

    from specreg.adapters.sglang import flags_of

    view = SimpleNamespace(speculative_algorithm="EAGLE", speculative_num_steps=3,
                           speculative_eagle_topk=1, speculative_num_draft_tokens=4,
                           speculative_accept_threshold_single=1.0,
                           speculative_accept_threshold_acc=0.25)
    flags = flags_of(view)
    assert flags["speculative_accept_threshold_acc"] == 0.25
    plan = registry.resolve(flags)
    assert plan.lossy and plan.verifier.threshold_acc == 0.25
    view.speculative_accept_threshold_acc = 1.0  # SGLang's defaults: the lossless plan
    assert not registry.resolve(flags_of(view)).lossy
