"""`tree_verify`: SGLang's eagle_sample on specreg's tree kernels, against SGLang's own Triton.

Two framework runs, started together (children of one process that imports SGLang once,
one_import.py): the adapter in enforce mode with the switch on (SGLang's plugin loader installs
the substitution), and with the switch unset (SGLang's objects must be its own; then the SR182
faults). The oracle comparisons run SGLang's Triton kernels
under TRITON_INTERPRET=1 on the same inputs; every count is pinned, case by case.

Sampling: specreg takes SGLang's acceptance uniforms (so its acceptance decisions are compared
with SGLang's kernels', path, count and accepted drafts, request by request), but draws the
final token (correction or bonus) by its own exact race on the random stream, keyed by the
request's sampling_seed and sequence length (a fresh key when unseeded), not by SGLang's one
24-bit final coin. SGLang's final token is therefore no oracle: the final tokens are checked
by their distribution (chi-square against the filtered target), by the seeded request's
independence of its batch, and, for seeded requests, against specreg's kernel keyed as the
substitution documents.
"""

from __future__ import annotations

import math
from pathlib import Path

import pytest
import torch

from tests.adapters.conftest import run_in_env

HERE = Path(__file__).parent
SCRIPT = str(HERE / "sglang_tree_verify.py")

#: (trees, nodes N, depth): SGLang's common shapes and a deep, wide one; 2,400 trees in all.
GREEDY_BATCHES = [[1200, 6, 3], [900, 8, 4], [300, 12, 6]]
SIZES = {
    "greedy_batches": GREEDY_BATCHES,
    "chain": [200, 4, 16],  # chains, nodes, vocab
    "renorm": [200, 32],  # rows, vocab
    "murmur": [64, 5],  # seeds, columns
    "eagle_greedy": [64, 8, 8, 4],  # requests, nodes, vocab, depth
    "chi_square_samples": 20000,
    "seeded": 8,
    "eagle_rejection": [64, 4, 16],  # seeded chains, nodes, vocab
}


@pytest.fixture(scope="module")
def runs(framework_env, model_dirs) -> dict:
    """mode -> the script's JSON: "on" (enforce + tree_verify), "off" (enforce, switch unset);
    both children of one framework process that imports SGLang once (one_import.py)."""
    payload = {"model_path": str(model_dirs["llama"]), "sizes": SIZES}
    modes = {"on": {"SPECREG_SGLANG_SUBSTITUTE": "tree_verify"}, "off": {}}
    runs = {mode: {"env": extra, "payload": {**payload, "mode": mode}} for mode, extra in modes.items()}
    return run_in_env(framework_env, SCRIPT, {"payload": payload, "runs": runs}, timeout=600,
                      args=("--runs",), SPECREG_SGLANG="enforce", TRITON_INTERPRET="1")


# ------------------------------------------------------------------------------- switch
def test_switch_off_leaves_sglangs_own_objects_and_its_cpu_behaviour(runs):
    off = runs["off"]
    assert off["active"] == [] and off["log"] == []
    assert off["names"] == {
        "greedy_is_sglangs": True, "greedy_call_site_same": True,
        "eagle_sample_is_sglangs": True, "seeded_coins_is_sglangs": True,
        "sampling_is_none": True, "sampling_call_site_same": True,
        "renorm_is_none": [True, True], "renorm_call_site_same": [True, True],
        "greedy_module": "sglang.kernels.ops.speculative.spec_tree", "sampling_module": None,
        "chain_is_sglangs": True,
    }
    # what SGLang itself does on this CPU: the greedy kernel writes nothing (not even the
    # root's slot), and the sampling path calls a None renorm
    assert off["greedy_root_slot"] == [-1, -1]
    assert off["sampling"] == "TypeError: 'NoneType' object is not callable"


def test_switch_on_installs_every_seam_and_says_so_once(runs):
    on = runs["on"]
    assert on["active"] == ["tree_verify"]
    assert len(on["log"]) == 1 and on["log"][0].endswith(
        "SGLang runtime substitutions active: tree_verify")
    assert on["names"] == {
        "greedy_is_sglangs": False, "greedy_call_site_same": True,
        "eagle_sample_is_sglangs": False, "seeded_coins_is_sglangs": False,
        "sampling_is_none": False, "sampling_call_site_same": True,
        "renorm_is_none": [False, False], "renorm_call_site_same": [True, True],
        # SGLang's REPLACE wrapper copies the original's metadata; the None seams are ours
        "greedy_module": "sglang.kernels.ops.speculative.spec_tree",
        "sampling_module": "specreg.adapters.sglang_tree_kernels", "chain_is_sglangs": False,
    }


def test_a_missing_seam_or_an_unapplied_hook_is_sr182_naming_it(runs):
    seam = "sglang.kernels.ops.speculative.spec_tree.verify_tree_greedy_func"
    faults = runs["off"]["faults"]
    assert faults == {"missing_seam": ["SR182", seam], "not_applied": ["SR182", seam]}


# ------------------------------------------------------------------------------- oracles
def test_greedy_equals_sglangs_triton_kernel_on_every_random_tree(runs):
    greedy = runs["on"]["greedy_oracle"]
    assert greedy["agree"] == greedy["total"] == sum(b for b, _, _ in GREEDY_BATCHES) == 2400
    # the trees exercise every depth up to 6 (pinned: a change of the trees shows here)
    assert greedy["accepted_histogram"][:8] == [231, 824, 793, 446, 98, 5, 3, 0]


def test_eagle_sample_greedy_runs_end_to_end_and_equals_sglangs_triton_kernel(runs):
    greedy = runs["on"]["eagle_sample_greedy"]
    assert greedy["agree"] == greedy["total"] == 64
    # the root's slots, which SGLang's own CPU path leaves at -1
    assert greedy["root_slot"] == [0, 8, 16, 24, 32, 40, 48, 56]


def test_sampling_decisions_equal_sglangs_triton_chain_kernel_on_the_same_uniforms(runs):
    """Acceptance decisions only (see the module docstring: the final draw is specreg's)."""
    chain = runs["on"]["chain_oracle"]
    # the substituted target-only kernel, with the one-hot q of a top-1 draft (the rules coincide)
    assert chain["target_only"]["agree"] == chain["target_only"]["total"] == 200
    # specreg's recursive rejection sampling with SGLang's q
    assert chain["rejection"]["agree"] == chain["rejection"]["total"] == 200
    # the substituted chain kernel, called as eagle_sample calls it with rejection sampling on
    assert chain["chain_substituted"] == {"agree": 200, "total": 200}
    assert chain["target_only"]["accepted_mean"] > 0.3 and chain["rejection"]["accepted_mean"] > 0.2


def test_eagle_sample_with_rejection_sampling_decides_as_sglangs_triton_chain_kernel(runs):
    """Acceptance decisions as SGLang's kernel on its seeded coins; the final tokens are the
    stream's race keyed by (sampling_seed, seq_len + 1), as specreg's kernel keyed so draws."""
    rejection = runs["on"]["eagle_sample_rejection"]
    assert rejection["agree"] == rejection["total"] == 64 and rejection["accepted_mean"] > 0.2
    assert rejection["keyed_same"] == 64


def test_renorm_equals_sglangs_triton_renorm(runs):
    renorm = runs["on"]["renorm_oracle"]
    assert renorm["top_k"]["agree"] == renorm["top_k"]["total"] == 200
    assert renorm["top_p"]["agree"] == renorm["top_p"]["total"] == 200
    assert 1 < renorm["top_p"]["kept_mean"] < renorm["top_k"]["kept_mean"] < 32


def test_seeded_coins_equal_sglangs_triton_hash(runs):
    assert runs["on"]["murmur_oracle"] == {"agree": 64, "total": 64}


# ------------------------------------------------------------------------------- sampling
def filtered(logits: list[float], temperature: float, top_k: int, top_p: float,
             min_p: float) -> list[float]:
    """SGLang's verify order in plain Python: softmax(l / T), top-k renorm, top-p renorm over
    that, then min-p (the substitution's addition); renormalised."""
    weights = [math.exp(v / temperature) for v in logits]
    order = sorted(range(len(logits)), key=lambda i: -weights[i])
    keep = set(order[:top_k])
    mass = sum(weights[i] for i in keep)
    kept_p, running = set(), 0.0
    for i in order:
        if i in keep and running < top_p * mass:
            kept_p.add(i)
            running += weights[i]
    top = max(weights)
    if min_p > 0:
        kept_p = {i for i in kept_p if weights[i] >= min_p * top}
    total = sum(weights[i] for i in kept_p)
    return [weights[i] / total if i in kept_p else 0.0 for i in range(len(logits))]


def chi_square_p(counts: list[int], expected: list[float]) -> float:
    """The chi-square test's p-value of `counts` under `expected` (tokens with mass only;
    a count where the expected mass is zero gives 0)."""
    n = sum(counts)
    if any(c > 0 and e == 0 for c, e in zip(counts, expected, strict=True)):
        return 0.0
    cells = [(c, e * n) for c, e in zip(counts, expected, strict=True) if e > 0]
    stat = sum((c - m) ** 2 / m for c, m in cells)
    df = len(cells) - 1
    return float(torch.special.gammaincc(torch.tensor(df / 2), torch.tensor(stat / 2)))


def scenario():
    import importlib.util

    spec = importlib.util.spec_from_file_location("tree_script", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module.SCENARIO_LOGITS, module.SCENARIO_PARAMS


def test_sampled_tokens_follow_the_filtered_target_with_min_p(runs):
    logits, params = scenario()
    expected = filtered(logits, *params)
    without_min_p = filtered(logits, *params[:3], 0.0)
    support = [i for i, e in enumerate(expected) if e > 0]
    # every filter cuts: top-k (8..11), top-p and min-p each remove tokens the next one keeps
    assert support == [0, 1, 2, 3, 4] and without_min_p[5] > 0 and without_min_p[6] == 0
    chi = runs["on"]["chi_square"]
    counts = chi["lossless"]["counts"]
    assert sum(counts) == SIZES["chi_square_samples"] and chi["lossless"]["accept_mean"] > 0.3
    assert all(counts[i] == 0 for i in range(len(counts)) if i not in support)
    assert chi_square_p(counts, expected) > 1e-3
    # negative controls: the same draws against the target without min-p (what SGLang's own
    # order samples), and SGLang's lossy acceptance threshold against the target
    assert chi_square_p(counts, without_min_p) < 1e-6
    assert chi_square_p(chi["threshold_acc_0.3"]["counts"], expected) < 1e-6


def test_a_seeded_request_samples_the_same_alone_and_in_a_batch_with_its_own_min_p(runs):
    seeded = runs["on"]["seeded"]
    assert seeded["alone_same"] == seeded["total"] == 8 and seeded["repeat_same"]
    assert len(set(seeded["emitted"])) > 1  # the seeds differ, so do the draws


# ------------------------------------------------------------------------------- bad input
def test_bad_inputs_at_sglangs_call_sites_get_specregs_kernel_codes(runs):
    assert runs["on"]["bad_inputs"] == {
        "greedy_link_out_of_range": "SR903", "greedy_float_predict": "SR901",
        "greedy_one_slot": "SR900", "sampling_nan_probs": "SR904", "sampling_coin_one": "SR904",
        "sampling_threshold_zero": "SR904", "top_k_negative": "SR912", "top_p_zero": "SR913",
        "renorm_negative_probs": "SR904",
    }
