"""The plain per-row rule of match_tree: merge the continuations of a request's best matches into
one breadth-first draft tree (the test oracle).

Candidates are the continuation starts s whose preceding tokens match the history's last n
tokens, n >= min_ngram (n capped at max_ngram). The `breadth` best are kept: longer matches first,
then (match type "bfs", SGLang's recency order) the most recent, or ("prob") ranked by how many
kept continuations share a node. Each continuation is the `depth` tokens from s on (fewer where
the history ends); equal prefixes merge into one node. The first N - 1 nodes in breadth-first
order (depth, then the rank of the first continuation through the node), or by descending
count then that order for "prob", are the tree.
"""

from __future__ import annotations

from specreg_lookup.kernels.ngram_match.reference import match_lengths_row


def tree_row(
    tokens: list[int], *, min_ngram: int, max_ngram: int, breadth: int, num_nodes: int,
    match_type: str = "bfs",
) -> tuple[list[int], list[int]]:
    """(tokens, parents) of one request's tree: node 0 the root (the last token), parents -1
    for the root; only the proposed nodes (at most num_nodes - 1 of them) follow it."""
    total = len(tokens)
    ell = match_lengths_row(tokens, max_ngram)
    ranked = sorted(
        (s for s in range(total) if ell[s] >= min_ngram), key=lambda s: (-ell[s], -s)
    )[:breadth]
    depth = num_nodes - 1
    first: dict[tuple[int, ...], int] = {}  # prefix -> rank of the first continuation through it
    count: dict[tuple[int, ...], int] = {}
    for rank, s in enumerate(ranked):
        cont = tokens[s : s + depth]
        for d in range(1, len(cont) + 1):
            prefix = tuple(cont[:d])
            first.setdefault(prefix, rank)
            count[prefix] = count.get(prefix, 0) + 1
    if match_type == "bfs":
        order = sorted(first, key=lambda p: (len(p), first[p]))
    else:
        order = sorted(first, key=lambda p: (-count[p], len(p), first[p]))
    chosen = order[: num_nodes - 1]
    slot: dict[tuple[int, ...], int] = {(): 0}
    out_tokens, out_parents = [tokens[-1]], [-1]
    for prefix in chosen:
        slot[prefix] = len(out_tokens)
        out_tokens.append(prefix[-1])
        out_parents.append(slot[prefix[:-1]])
    return out_tokens, out_parents
