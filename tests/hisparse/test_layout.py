"""compute_layout: derived sizes and one coded problem per violated rule."""

import pytest
from specreg_hisparse.sizes import MAX_HOT_SIZE, compute_layout, layout_from_options


def codes(problems):
    return sorted(p.code for p in problems)


def test_sizes_are_derived():
    layout, problems = compute_layout(2048, 4096, None, 16, 4)
    assert problems == []
    assert layout.page_size == 4
    assert layout.scratch_rows == 4 * 2048 - 4096
    assert layout.buffer_size == 4096 + 4 + 4096
    assert layout.capacity >= 4 * 2048
    assert layout.device_rows == 16 * layout.buffer_size
    assert layout.host_rows == 16 * layout.max_seq_len
    assert (layout.tail_start, layout.scratch_start) == (4096, 4100)


def test_no_scratch_when_hot_covers_every_step():
    layout, _ = compute_layout(4, 64, None, 1, 3)
    assert layout.scratch_rows == 0


def test_hot_below_top_k_is_sr401_with_fix():
    layout, problems = compute_layout(2048, 1024, None, 4, 1)
    assert layout is None and codes(problems) == ["SR401"]
    assert "hot_size=2048" in problems[0].fix


def test_tail_smaller_than_tokens_per_step_is_sr402():
    _, problems = compute_layout(4, 8, 2, 4, 4)
    assert codes(problems) == ["SR402"]
    _, problems = compute_layout(4, 8, 4, 4, 4, tokens_per_step=5)
    assert codes(problems) == ["SR402"]


def test_steps_times_top_k_beyond_capacity_is_sr403():
    _, problems = compute_layout(4, 8, None, 4, 4, scratch_rows=0)
    assert codes(problems) == ["SR403"]
    assert "scratch_rows=8" in problems[0].fix
    layout, problems = compute_layout(4, 8, None, 4, 4, scratch_rows=8)
    assert problems == [] and layout.capacity == 16


@pytest.mark.parametrize("value", [0, -3, "x", True, 2.5])
def test_non_positive_or_non_integer_req_slots_is_sr404(value):
    _, problems = compute_layout(4, 8, None, value, 1)
    assert codes(problems) == ["SR404"]
    assert problems[0].field == "cache_options.req_slots"


def test_hot_above_limit_is_sr404():
    _, problems = compute_layout(4, MAX_HOT_SIZE * 2, None, 1, 1)
    assert "SR404" in codes(problems)


def test_device_rows_too_small_is_sr405():
    _, problems = compute_layout(4, 8, None, 4, 1, device_rows=10)
    assert codes(problems) == ["SR405"]


def test_unknown_policy_is_sr406():
    _, problems = compute_layout(4, 8, None, 4, 1, policy="clock")
    assert codes(problems) == ["SR406"]


def test_every_violation_is_reported_at_once():
    _, problems = compute_layout(8, 4, 1, 0, 3, scratch_rows=0, policy="fifo")
    assert codes(problems) == ["SR401", "SR402", "SR403", "SR404", "SR406"]


def test_options_accept_cli_strings_and_default_max_steps_from_width():
    layout, problems = layout_from_options({"top_k": "4", "hot_size": "8"}, verify_width=5)
    assert problems == [] and layout.max_steps == 5 and layout.page_size == 5


def test_max_steps_below_width_is_sr400_naming_limit_and_fix():
    layout, problems = layout_from_options({"max_steps": 2}, verify_width=6)
    assert layout is None and codes(problems) == ["SR400"]
    assert "max_steps=2" in problems[0].message
    assert "--kv-cache-option max_steps=6" in problems[0].fix
