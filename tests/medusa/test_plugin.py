"""The Medusa plugin: the static tree and its EAGLE numbering, bad input before any model
loads, and the drafter's two ways in (all heads at once, or head by head)."""

from __future__ import annotations

import itertools

import pytest
import torch
from specreg.kernels.tree_build import build_tree
from specreg.kernels.tree_build.reference import build_tree_reference
from specreg.kernels.tree_build.types import TreeBuildInputs
from specreg_medusa.sizes import eagle_layout, static_tree, tree_nodes

from specreg import ConfigError, KernelInputError, Registry


@pytest.fixture(scope="module")
def registry():
    return Registry.load(allowlist={"medusa", "eagle", "draft_model"}, fresh=True)


SHAPES = [
    (s, k, n)
    for s, k in itertools.product((1, 2, 3, 4), (1, 2, 3, 4))
    for n in sorted({s + 1, min(tree_nodes(s, k), 1 + s * k), min(tree_nodes(s, k), 12)})
]


@pytest.mark.parametrize("steps, topk, width", SHAPES)
def test_static_tree_is_prefix_closed_and_reaches_every_head(steps, topk, width):
    paths = static_tree(steps, topk, width)
    assert len(paths) == len(set(paths)) == width - 1
    assert all(p[:-1] in paths or len(p) == 1 for p in paths)
    assert all(len(p) <= steps and max(p) < topk for p in paths)
    assert (0,) * steps in paths  # the top-1 chain through every head


@pytest.mark.parametrize("steps, topk, width", SHAPES)
def test_eagle_numbering_builds_the_static_tree(steps, topk, width):
    """build_tree, fed the layout, links each node to the parent its path names, on the
    kernel and on its per-request reference."""
    layout = eagle_layout(steps, topk, width)
    tokens = torch.arange(1, width)[None, :]  # node i's token is i
    args = (
        torch.tensor([0]), torch.tensor([layout.parent_list], dtype=torch.int64).view(1, -1),
        torch.tensor([layout.ids]), tokens, torch.tensor([5]),
    )
    kwargs = dict(topk=layout.encoding_topk, depth=steps, num_verify_tokens=width,
                  mask_mode="qlen_only")
    tree = build_tree(*args, **kwargs)
    reference = build_tree_reference(TreeBuildInputs(*args, **kwargs))
    assert torch.equal(tree.tree_mask, reference.tree_mask)
    assert int(tree.invalid[0]) == 0
    mask = tree.tree_mask.view(width, width)
    paths = [(), *layout.paths]  # node 0 is the root
    assert set(layout.paths) == set(static_tree(steps, topk, width))
    for node in range(1, width):
        path = paths[node]
        ancestors = {paths[i] for i in range(width) if mask[node, i] and i != node}
        assert ancestors == {path[:d] for d in range(len(path))}
        assert int(tree.positions[node]) == 5 + len(path)


def test_defaults_and_the_vllm_chain(registry):
    plan = registry.resolve({"algorithm": "medusa"})
    assert (plan.config.num_steps, plan.config.topk, plan.config.num_draft_tokens) == (4, 2, 9)
    plan = registry.resolve({"method": "medusa", "num_speculative_tokens": 3})
    assert (plan.config.num_steps, plan.config.topk, plan.config.num_draft_tokens) == (3, 1, 4)
    assert type(plan.verifier).__name__ == "TreeVerifier"
    assert type(plan.drafter).__name__ == "MedusaDrafter"
    heads = registry.resolve({"algorithm": "medusa", "draft_config": {"medusa_num_heads": 3}})
    assert heads.config.num_steps == 3


def test_every_problem_at_once_before_any_model_loads(registry):
    config = {"algorithm": "medusa", "num_steps": 5, "num_draft_tokens": 99,
              "draft_config": {"medusa_num_heads": 4, "medusa_num_layers": -1}}
    codes = sorted(p.code for p in registry.check(config) if p.is_error)
    assert codes == ["SR480", "SR481", "SR482"]
    zero = {"algorithm": "medusa", "draft_config": {"num_heads": 0}}
    [found] = [p for p in registry.check(zero) if p.is_error]
    assert found.code == "SR480" and "num_heads=0" in found.message
    with pytest.raises(ConfigError, match="SR103"):
        registry.resolve({"algorithm": "medusa", "num_steps": 0})


def test_heads_of_another_vocabulary(registry, tmp_path):
    import json

    (tmp_path / "target").mkdir()
    (tmp_path / "target" / "config.json").write_text(json.dumps({"vocab_size": 32000}))
    (tmp_path / "heads").mkdir()
    (tmp_path / "heads" / "config.json").write_text(
        json.dumps({"medusa_num_heads": 4, "vocab_size": 32001})
    )
    problems = registry.check({
        "--speculative-algorithm": "medusa", "--model-path": str(tmp_path / "target"),
        "--speculative-draft-model-path": str(tmp_path / "heads"),
    })
    assert [p.code for p in problems if p.is_error] == ["SR483"]
    from specreg_medusa.checkpoint import parse_heads_config

    heads, found = parse_heads_config({"medusa_num_heads": 4, "vocab_size": 32001},
                                      draft_flag="--speculative-draft-model-path")
    assert (heads.num_heads, heads.vocab_size, found) == (4, 32001, [])


def test_head_by_head_equals_all_heads_at_once(registry):
    drafter = registry.resolve({"algorithm": "medusa", "num_steps": 3, "topk": 3}).drafter
    g = torch.Generator().manual_seed(0)
    b, v = 4, 50
    logits = torch.randn(b, 3, v, generator=g)
    bonus, lens = torch.randint(0, v, (b,), generator=g), torch.tensor([7, 9, 3, 12])
    at_once = drafter.tree_from_heads(logits, bonus, lens)
    draft = drafter.start(logits[:, 0], torch.zeros(b, 2))
    for d in (1, 2):  # per branch, as a draft loop passes them: the first branch is used
        branches = logits[:, d].repeat_interleave(drafter.topk, 0)
        draft = drafter.step(draft, branches, draft.hidden)
    stepped = drafter.tree(draft, bonus, lens)
    assert torch.equal(at_once.draft_tokens, stepped.draft_tokens)
    assert torch.equal(at_once.tree_mask, stepped.tree_mask)
    top = logits.topk(3, dim=-1).indices
    tokens = at_once.draft_tokens.view(b, -1)
    assert torch.equal(tokens[:, 0], bonus) and torch.equal(tokens[:, 1], top[:, 0, 0])


def test_heads_module_and_bad_run_time_inputs(registry):
    drafter = registry.resolve({"algorithm": "medusa", "num_steps": 2, "topk": 4}).drafter
    heads = drafter.make_heads(hidden_size=16, vocab_size=40)
    assert heads(torch.randn(3, 16)).shape == (3, 2, 40)
    with pytest.raises(KernelInputError, match="SR485"):
        drafter.tree_from_heads(torch.randn(2, 3, 40), torch.zeros(2, dtype=torch.long),
                                torch.ones(2, dtype=torch.long))  # three heads, plan serves two
    with pytest.raises(KernelInputError, match="SR485"):
        drafter.start(torch.randn(2, 3), torch.zeros(2, 1))  # vocabulary below topk


def test_conformance_kit_passes(registry):
    """The kit's contract (widths, buffers, greedy == plain greedy through the heads step,
    lossless tree sampling, adaptive candidates) with the toy model as heads."""
    from specreg.testing import check_algorithm

    report = check_algorithm(registry, "medusa", samples=1000)
    assert report.failures == [] and len(report.checked) > 10


@pytest.mark.parametrize(
    "config",
    [
        {"algorithm": "medusa", "candidate_steps": [2]},
        {"algorithm": "medusa", "num_steps": 3, "candidate_steps": [1, 2]},
        {"algorithm": "medusa", "num_steps": 4, "topk": 3, "num_draft_tokens": 11,
         "candidate_steps": [2, 3]},
    ],
)
def test_a_plans_own_config_resolves_to_the_same_candidates(config):
    """The plan's config states the inferred main width; its candidates must not change when
    that config is resolved again (found by the long fuzz profile: width 5, then 7)."""
    from specreg import Registry

    registry = Registry.load(allowlist={"medusa", "eagle"}, fresh=True)
    plan = registry.resolve(config)
    again = registry.resolve(plan.config.to_dict())
    assert again.resolution == plan.resolution
