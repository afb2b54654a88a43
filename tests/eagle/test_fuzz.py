"""Fuzz EAGLE's plan verifier and its draft helpers (torch path): a verifier built from any sizes
and mask mode, then a tree built from any draft lists, is a result or a coded error (the core
tree kernels' own fuzz targets: tests/kernels/test_tree_fuzz.py)."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st
from specreg_eagle.verifier import EagleVerifier

from tests.support.fuzz import coded_or_result, fuzz_settings
from tests.support.kernel_inputs import all_meta, float_tensor, index_tensor

pytestmark = pytest.mark.fuzz

tree_dims = st.fixed_dictionaries(
    {"b": st.integers(0, 3), "k": st.integers(1, 3), "s": st.integers(1, 3), "v": st.integers(1, 6)}
)


@fuzz_settings(100)
@given(data=st.data(), d=tree_dims, lists_ok=st.booleans())
def test_eagle_verifier_and_draft_helpers(data, d, lists_ok):
    b, k, s = d["b"], d["k"], d["s"]
    n = data.draw(st.integers(-1, 10))
    verifier, error = coded_or_result(
        lambda: EagleVerifier(num_steps=s, topk=k, num_draft_tokens=n,
                              mask_mode=data.draw(st.sampled_from(["full", "qlen_only", "?"])))  # fmt: skip
    )
    if error is not None:
        return
    scores = [data.draw(float_tensor((b, 1, k), probabilities=False))]
    tokens = [data.draw(index_tensor((b, k), 0, 5))]
    parents = [data.draw(index_tensor((b, k + 1), -1, k))]
    if not lists_ok:
        tokens = tokens + tokens
    tree, error = coded_or_result(
        lambda: verifier.build_tree(
            data.draw(index_tensor((b,), 0, 5)), data.draw(index_tensor((b,), 0, 9, huge=False)),
            score_list=scores, token_list=tokens, parents_list=parents,
        )
    )
    if error is None and not all_meta(*scores, *tokens):
        assert tree.retrieve_index.shape[0] == b
