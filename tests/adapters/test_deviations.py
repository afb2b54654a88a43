"""`difference`, `matches` and `audit` of the deviation table, on planted cases (no framework)."""

from __future__ import annotations

import pytest

from tests.adapters.deviations import (
    audit,
    conditions_of,
    difference,
    failures,
    matches,
    reference_size,
    row_problems,
    summary,
)

RESOLVED = {"error": None, "values": {"num_steps": 3, "topk": 1, "num_draft_tokens": 4}, "gamma": 3,
            "widths": {"target": {"target_verify": 4}}}


def resolved(**changes):
    out = {**RESOLVED, "values": dict(RESOLVED["values"])}
    for key, value in changes.items():
        if key in out["values"]:
            out["values"][key] = value
        else:
            out[key] = value
    return out


def crash(name="AssertionError"):
    return {"error": name, "refusal": False, "cause": "assert x is None"}


def refusal(name="ValueError"):
    return {"error": name, "refusal": True, "cause": "page size"}


def codes(*found):
    return {"error": list(found)}


@pytest.mark.parametrize(("theirs", "ours", "kind"), [
    (RESOLVED, RESOLVED, "same"),
    (refusal(), codes("SR103"), "both-refuse"),
    (crash(), RESOLVED, "rescued:AssertionError:resolves"),
    (crash("TypeError"), codes("SR201", "SR103"), "rescued:TypeError:SR201,SR103"),
    (RESOLVED, codes("SR200"), "stricter:SR200"),
    (refusal("ValidationError"), RESOLVED, "looser:ValidationError"),
    (resolved(num_draft_tokens=None, gamma=None), RESOLVED, "values:num_draft_tokens,gamma"),
    (resolved(widths={"target": {"target_verify": 7}}), RESOLVED, "values:widths"),
])
def test_difference_puts_each_pair_in_one_class(theirs, ours, kind):
    assert difference(theirs, ours) == kind


def test_difference_compares_only_the_given_fields():
    theirs, ours = {"error": None, "gamma": 3, "verify_width": 4}, {"error": None, "gamma": 3,
                                                                    "verify_width": 5}
    assert difference(theirs, ours, ("gamma",)) == "same"
    assert difference(theirs, ours, ("gamma", "verify_width")) == "values:verify_width"


def test_a_crash_is_never_agreement_even_when_specreg_refuses():
    # two refusals agree only as refusals; a framework crash (no ValueError) is rescued
    assert difference(crash(), codes("SR103")) != "both-refuse"


TREE = {"framework": "sglang", "algorithm": "EAGLE", "target": "llama", "steps": 3, "topk": 4,
        "draft": None}


def case(**changes):
    return {**TREE, **changes}


def test_conditions_are_semantic_not_grid_values():
    assert conditions_of(case())["topk"] == "tree"
    assert conditions_of(case(topk=1))["topk"] == "chain"
    assert conditions_of(case(topk=None))["topk"] == "unset"
    # draft tokens against the tree's nodes: 1 + 4 + 2 * 16 = 37
    assert reference_size(case()) == 37
    positions = {d: conditions_of(case(draft=d))["draft"] for d in (None, 1, 2, 36, 37, 38)}
    assert positions == {None: "unset", 1: "one", 2: "below", 36: "below", 37: "at", 38: "above"}
    # a DSpark block is gamma + 1 draft tokens; the flag wins over the checkpoint
    dspark = {"algorithm": "DSPARK", "checkpoint_block_size": 5, "draft": 6}
    assert conditions_of(dspark)["draft"] == "at"
    assert conditions_of({**dspark, "block_flag": 3})["draft"] == "above"
    assert conditions_of({"algorithm": "DFLASH", "checkpoint_block_size": 8, "draft": 8})["draft"] == "at"
    # vLLM's k drafts k tokens (k + 1 verified)
    assert conditions_of({"algorithm": "dspark", "checkpoint_block_size": 5, "k": 5})["draft"] == "at"
    assert conditions_of(case(target="grok"))["target_defaults"] == "wide-tree"
    assert conditions_of(case(target="qwen3"))["target_defaults"] == "chain"


ROW = {"id": "tree-draft-unset", "framework": "sglang", "kind": "values:num_draft_tokens,gamma",
       "when": {"topk": ["tree"], "draft": ["unset"]}, "cases": 2, "framework_does": "-",
       "specreg_does": "-", "reason": "-"}


def test_matches_needs_every_condition_and_a_nonempty_when():
    assert matches(ROW, case())
    assert not matches(ROW, case(draft=5))
    assert not matches(ROW, case(topk=1))
    assert not matches({**ROW, "when": {}}, case())
    assert not matches({**ROW, "when": {"no_such_condition": [True]}}, case())


def test_row_shape_refuses_empty_unknown_and_grid_value_conditions():
    assert row_problems(ROW) == []
    assert any("empty 'when'" in p for p in row_problems({**ROW, "when": {}}))
    assert any("unknown condition 'draft_tokens'" in p
               for p in row_problems({**ROW, "when": {"draft_tokens": [8]}}))
    # a grid value where a category belongs (topk 4 instead of "tree") is refused
    assert any("topk=4" in p for p in row_problems({**ROW, "when": {"topk": [4]}}))
    assert any("not a difference" in p for p in row_problems({**ROW, "kind": "same"}))


def entry(cid, kind, **changes):
    return {"id": cid, "case": case(**changes), "kind": kind}


def planted():
    return [
        entry("a", "values:num_draft_tokens,gamma", steps=3),
        entry("b", "values:num_draft_tokens,gamma", steps=5),
        entry("c", "same", draft=37),
        entry("d", "both-refuse", draft=1),
        entry("e", "rescued:AssertionError:resolves", steps=None, draft=5),
    ]


def test_audit_counts_classes_and_names_the_undocumented_case():
    report = audit("sglang", planted(), [ROW])
    assert report["counts"] == {"same": 1, "both-refuse": 1, "rescued": 1, "stricter": 0,
                                "looser": 0, "values": 2}
    assert report["covered"] == {"a": "tree-draft-unset", "b": "tree-draft-unset"}
    assert report["undocumented"] == [{"case": "e", "kind": "rescued:AssertionError:resolves"}]
    assert summary(report)["undocumented"] == 1 and summary(report)["cases"] == 5
    assert set(failures(report)) == {"undocumented"}


def test_audit_fails_a_stale_row_and_a_wrong_count():
    stale = {**ROW, "id": "stale", "kind": "stricter:SR200", "when": {"draft": ["above"]}}
    report = audit("sglang", planted()[:4], [ROW, stale])
    assert report["stale"] == ["stale"]
    report = audit("sglang", planted()[:4], [{**ROW, "cases": 3}])
    assert report["miscounted"] == [{"row": "tree-draft-unset", "states": 3, "covers": 2}]


def test_audit_fails_an_overbroad_row():
    # "topk is a tree" alone also holds for the agreeing case c and the refusal d
    broad = {**ROW, "when": {"topk": ["tree"]}}
    report = audit("sglang", planted()[:4], [broad])
    assert report["overbroad"] == [{"row": "tree-draft-unset", "other_kind_cases": ["c", "d"],
                                    "count": 2}]


def test_audit_fails_overlapping_and_malformed_rows():
    twin = {**ROW, "id": "twin", "when": {"draft": ["unset"], "target": ["llama"]}}
    report = audit("sglang", planted()[:4], [ROW, twin])
    assert {"case": "a", "rows": ["tree-draft-unset", "twin"]} in report["overlapping"]
    empty = {**ROW, "id": "empty", "when": {}}
    report = audit("sglang", planted()[:4], [ROW, empty])
    assert any("empty" in p for p in report["malformed"]) and "empty" in report["stale"]


def test_audit_reads_only_its_frameworks_rows():
    other = {**ROW, "framework": "vllm"}
    report = audit("sglang", planted()[:2], [other])
    assert len(report["undocumented"]) == 2 and report["stale"] == []


def _snapshot(**cases):
    return {"framework": "sglang", "version": "0.5.23", "cases": cases}


def test_snapshot_diff_names_each_changed_new_and_gone_case():
    from tests.adapters.parity import snapshot_diff

    same = {"case": TREE, "framework": RESOLVED, "specreg": RESOLVED, "kind": "same"}
    moved = {**same, "specreg": codes("SR201"), "kind": "stricter:SR201"}
    old = _snapshot(**{"EAGLE s=3": same, "EAGLE s=4": same})
    assert snapshot_diff(old, old) == []
    changed = snapshot_diff(old, _snapshot(**{"EAGLE s=3": moved, "EAGLE s=5": same}))
    assert "new case: EAGLE s=5" in changed and "case gone: EAGLE s=4" in changed
    lines = [line for line in changed if line.startswith("case 'EAGLE s=3'")]
    assert [line.split(":")[1].split()[0] for line in lines] == ["specreg", "kind"]
    assert snapshot_diff(None, old) == ["no committed snapshot for sglang"]


def test_the_report_command_refuses_unknown_arguments(capsys):
    from tests.adapters.parity import main

    assert main(["recount"]) == 2 and "usage" in capsys.readouterr().err
    assert main(["update", "--committed"]) == 2


def test_the_committed_report_prints_every_class_per_framework(capsys):
    from tests.adapters.parity import main

    assert main(["report", "--committed"]) == 0
    out = capsys.readouterr().out
    for framework in ("sglang 0.5.23", "vllm 0.33.0"):
        line = next(line for line in out.splitlines() if line.startswith(framework))
        for name in ("cases", "same values", "both refuse", "rescued", "stricter", "looser",
                     "values differ", "undocumented 0"):
            assert name in line, (name, line)
    assert out.count("audit: clean") == 2


def test_proposed_conditions_select_exactly_the_kinds_cases():
    from tests.adapters.parity_rows import _selects, propose

    cases = [conditions_of(case(steps=s, topk=k, draft=d)) for s in (1, 3) for k in (1, 2, 4)
             for d in (None, 1, 5)]
    mine = [c for c in cases if c["topk"] == "tree" and c["draft"] == "unset"]
    others = [c for c in cases if c not in mine]
    whens = propose(mine, others)
    assert whens and all(name in ("topk", "draft") for w in whens for name in w)
    assert all(any(_selects(w, c) for w in whens) for c in mine)
    assert not any(_selects(w, c) for w in whens for c in others)
