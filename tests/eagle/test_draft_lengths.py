"""Per-request draft lengths through EAGLE's plan objects: a tree the drafter cuts equals the
lengths given to the verifier, and the topk-1 chain path takes them (the kernels' own tests:
tests/kernels/test_tree_draft_lengths.py)."""

import torch
from specreg_eagle.drafter import EagleDrafter
from specreg.kernels.tree_lengths import node_depths
from specreg_eagle.verifier import EagleVerifier

from tests.support.eagle import random_draft

VOCAB = 6


# -------------------------------------------------------------------------- verifier + drafter
def test_drafted_tree_cut_by_the_drafter_equals_lengths_given_to_the_verifier():
    gen = torch.Generator().manual_seed(3)
    steps, n = 3, 8
    drafter = EagleDrafter(topk=2, widths_by_steps={steps: n})
    verifier = EagleVerifier(num_steps=steps, topk=2, num_draft_tokens=n)
    parent_list, sel, drafts = random_draft(4, 2, steps, n, VOCAB, gen)
    bonus, seq = torch.randint(0, VOCAB, (4,), generator=gen), torch.full((4,), 5)
    full = verifier.build_tree(bonus, seq, parent_list=parent_list, top_scores_index=sel,
                               draft_tokens=drafts)
    lengths = [0, 1, 2, 3]
    from specreg.kernels.tree_lengths import cut_tree

    cut = cut_tree(full, lengths, depth=steps)
    logits = torch.randn(VOCAB, VOCAB, generator=gen)[full.draft_tokens.view(4, n)]
    a = verifier.verify_greedy(cut, logits)
    b = verifier.verify_greedy(full, logits, draft_lengths=lengths)
    assert torch.equal(a.output_tokens, b.output_tokens)
    reach = node_depths(cut.retrieve_next_token, cut.retrieve_next_sibling)
    reachable = _reachable(cut.retrieve_next_token, cut.retrieve_next_sibling)
    assert all(int(reach[r][reachable[r]].max()) <= lengths[r] for r in range(4))
    assert drafter.width_for(steps) == n


def _reachable(nt, ns):
    """bool [b, N]: the nodes a walk from the root can reach through the links."""
    b, n = nt.shape
    out = torch.zeros(b, n, dtype=torch.bool)
    for r in range(b):
        stack = [0]
        while stack:
            node = stack.pop()
            out[r, node] = True
            for link in (nt[r, node], ns[r, node]):
                if int(link) >= 0:
                    stack.append(int(link))
    return out


def test_chain_path_of_topk_one_takes_lengths():
    gen = torch.Generator().manual_seed(4)
    steps, n, b = 3, 4, 6
    verifier = EagleVerifier(num_steps=steps, topk=1, num_draft_tokens=n)
    parent_list, sel, drafts = random_draft(b, 1, steps, n, VOCAB, gen)
    tree = verifier.build_tree(torch.zeros(b, dtype=torch.int64), torch.full((b,), 2),
                               parent_list=parent_list, top_scores_index=sel, draft_tokens=drafts)
    p = torch.full((b, n, VOCAB), 1.0 / VOCAB)
    q = p.clone()  # q = p: every draft is accepted unless capped
    lengths = torch.tensor([0, 1, 2, 3, 0, 2])
    out = verifier.verify_sampling(tree, p, draft_probs=q, keys=torch.ones(b, dtype=torch.int64),
                                   draft_lengths=lengths)
    assert torch.equal(out.num_accepted.long(), lengths)
