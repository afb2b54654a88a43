"""`plan.memory()` (specreg/contract/memory.py): each built-in plan object's memory() states, per request,
exactly the bytes of the tensors a small real call allocates (measured from the tensors, never
hard-coded); `specreg plan` states the memory of absurd configs, budgets are enforced with a
code, and resolving allocates nothing a server allocates later."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import torch
from specreg_eagle.drafter import EagleDrafter
from specreg_eagle.kernels.select_topk import organize_draft_results

from specreg import Registry
from specreg.step.chain_verifier import ChainVerifier
from specreg.contract.memory import PER_REQUEST
from tests.support.cli import fix_line, specreg

ABSURD = (
    "--speculative-algorithm", "eagle", "--kv-cache", "hisparse", "--speculative-num-steps", "32",
    "--speculative-eagle-topk", "8", "--speculative-num-draft-tokens", "1024",
)


VOCAB = 16
BATCH = 3


@pytest.fixture(scope="module")
def registry():
    return Registry.load(fresh=True)


def _stated(obj, **kwargs):
    buffers = list(obj.memory(**kwargs))
    assert all(b.per.startswith(PER_REQUEST) and b.host_bytes == 0 for b in buffers)
    return {b.name: b.device_bytes for b in buffers}


def _per_request(*tensors):
    total = sum(t.numel() * t.element_size() for t in tensors)
    assert total % BATCH == 0
    return total // BATCH


def _logits(gen, *shape):
    return torch.randn(*shape, VOCAB, generator=gen)


def _verify_outputs(out):
    found = [out.output_tokens, out.accepted_index, out.num_accepted, out.bonus]
    return found + ([out.predicts] if out.predicts is not None else [])


@pytest.mark.parametrize("width", [2, 5])
def test_chain_verifier_states_its_candidates_and_result(width):
    gen = torch.Generator().manual_seed(width)
    candidates = torch.randint(0, VOCAB, (BATCH, width), generator=gen)
    out = ChainVerifier(width).verify_greedy(candidates, _logits(gen, BATCH, width))
    stated = _stated(ChainVerifier(width))
    assert stated["candidates"] == _per_request(candidates)
    assert sum(stated.values()) == _per_request(candidates, *_verify_outputs(out))


@pytest.mark.parametrize("mask_mode", ["full", "qlen_only", "qlen_only_bitpacking"])
@pytest.mark.parametrize(("steps", "topk", "width"), [(1, 2, 3), (3, 2, 6), (4, 3, 12)])
def test_eagle_drafter_and_verifier_state_what_a_step_allocates(
    registry, mask_mode, steps, topk, width
):
    plan = registry.resolve({"algorithm": "eagle", "num_steps": steps, "topk": topk,
                             "num_draft_tokens": width})
    verifier = plan.verifier
    drafter = EagleDrafter(topk=topk, widths_by_steps=plan.drafter.widths_by_steps,
                           mask_mode=mask_mode)
    gen = torch.Generator().manual_seed(steps * 100 + width)
    draft = drafter.start(_logits(gen, BATCH), torch.zeros(BATCH, 3))
    for _ in range(1, steps):
        draft = drafter.step(draft, _logits(gen, BATCH * topk), draft.hidden)
    kept = organize_draft_results(draft.score_list, draft.token_list, draft.parents_list, width)
    seq_lens = torch.tensor([5, 7, 9])
    tree = drafter.tree(draft, torch.tensor([1, 2, 3]), seq_lens)
    tree_tensors = (tree.tree_mask, tree.positions, tree.retrieve_index, tree.retrieve_next_token,
                    tree.retrieve_next_sibling, tree.draft_tokens, tree.invalid)
    stated = _stated(drafter, context_len=int(seq_lens.sum()) // BATCH)
    assert stated[f"tree_mask ({mask_mode})"] == _per_request(tree.tree_mask)
    assert sum(stated.values()) == _per_request(
        *draft.score_list, *draft.token_list, *draft.parents_list, draft.input_ids, draft.scores,
        *kept, *tree_tensors,
    )
    out = verifier.verify_greedy(tree, _logits(gen, BATCH, width))
    assert sum(_stated(verifier).values()) == _per_request(*_verify_outputs(out))


@pytest.mark.parametrize("algorithm", ["dspark", "dflash"])
def test_block_drafter_and_verifier_state_what_a_step_allocates(registry, algorithm):
    draft_config = {"vocab_size": VOCAB, "markov_rank": 4 if algorithm == "dspark" else 0,
                    "markov_head_type": "vanilla", "mask_token_id": VOCAB - 1, "block_size": 5}
    plan = registry.resolve({"algorithm": algorithm, "draft_config": draft_config})
    drafter, verifier = plan.drafter, plan.verifier
    gen = torch.Generator().manual_seed(7)
    anchor = torch.tensor([1, 2, 3])
    block = drafter.build_draft_block(anchor, torch.tensor([5, 7, 9]), vocab_size=VOCAB)
    head = drafter.make_head(vocab_size=VOCAB, hidden_size=0)
    base = _logits(gen, BATCH, drafter.draft_width).to(torch.bfloat16)  # sampling copies to fp32
    drafts, logits = drafter.propose(base, anchor, head=head, temperature=0.7, generator=gen)
    chain = drafter.candidates(anchor, drafts)
    stated = _stated(drafter, vocab_size=VOCAB)
    assert stated["draft_logits (sampling)"] == _per_request(logits)
    assert sum(stated.values()) == _per_request(*block, drafts, chain, logits)
    assert _stated(drafter)["draft_logits (sampling)"] == 0  # the plan has no vocab size
    out = verifier.verify_greedy(chain, _logits(gen, BATCH, chain.shape[1]))
    assert sum(_stated(verifier).values()) == _per_request(chain, *_verify_outputs(out))


def test_plan_states_its_memory():
    result = specreg("plan", *ABSURD, "--json")
    assert result.returncode == 0, result.stderr
    memory = json.loads(result.stdout)["memory"]
    buffers = {b["name"]: b for b in memory["buffers"]}
    assert buffers["device_buffer"]["device_bytes"] == 64 * (4096 + 1024 + 1024 * 2048 - 4096) * 656
    assert buffers["host_cache"]["host_bytes"] == 64 * 32768 * 656
    assert memory["device_bytes"] > 80 * 2**30
    assert memory["unstated"] == []
    assert buffers["tree_mask (full)"]["owner"] == "drafter"
    assert buffers["tree_mask (full)"]["device_bytes"] == 1024 * 1024
    assert buffers["tree_mask (full)"]["per"].startswith("per request")
    assert buffers["output_tokens"] == {
        "name": "output_tokens", "device_bytes": 33 * 8, "host_bytes": 0, "per": "per request",
        "owner": "verifier",
    }
    text = specreg("plan", *ABSURD).stdout
    assert "memory         total: device 84.1 GiB, host 1.3 GiB" in text


@pytest.mark.parametrize("command", ["check", "plan"])
def test_memory_budget_is_enforced_with_a_code(command):
    result = specreg(command, *ABSURD, "--memory-budget", "16GiB")
    assert result.returncode == 1
    out = result.stdout + result.stderr
    assert "[SR145] the plan needs 84.1 GiB of device memory, over the 16.0 GiB budget" in out
    assert "cache_swapper.device_buffer" in out
    assert fix_line(out, "SR145").startswith("lower the draft widths (--speculative-num-draft-tokens")
    ok = specreg(command, "--speculative-algorithm", "eagle", "--memory-budget", "16GiB")
    assert ok.returncode == 0, ok.stdout + ok.stderr


def test_memory_budget_needs_a_size():
    result = specreg("check", "--speculative-algorithm", "eagle", "--memory-budget", "lots")
    assert result.returncode == 1
    assert fix_line(result.stdout, "SR143") == "pass e.g. --memory-budget 16GiB. "


def test_resolving_allocates_nothing_a_server_allocates_later():
    code = (
        "import resource, torch, specreg\n"
        "registry = specreg.Registry.load(allowlist={'eagle', 'hisparse'})\n"
        "registry.resolve({'algorithm': 'eagle'})\n"
        "before = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss\n"
        "plan = registry.resolve({'algorithm': 'eagle', 'cache': 'hisparse', 'num_steps': 32,"
        " 'topk': 8, 'num_draft_tokens': 1024})\n"
        "grown = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss - before\n"
        "print(grown, plan.cache_swapper._state is None, plan.memory().device_bytes)\n"
    )
    result = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    grown_kib, lazy, device = result.stdout.split()
    assert lazy == "True" and int(device) > 80 * 2**30
    assert int(grown_kib) < 64 * 1024  # eager swap state alone was > 500 MiB
