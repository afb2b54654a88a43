"""The plain per-row rule of ngram_match: vLLM 0.33's
`_find_longest_matched_ngram_and_propose_tokens`, in plain Python (the test oracle).

vLLM reverses the tokens and runs KMP with the failure table capped at max_ngram: the longest
n-gram (n <= max_ngram) that ends the history and occurred before wins, and among its
occurrences the earliest; the drafts are up to k tokens that followed it, fewer when the history
ends first, none when no n >= min_ngram matched.
"""

from __future__ import annotations


def propose_row(tokens: list[int], min_ngram: int, max_ngram: int, k: int) -> list[int]:
    """vLLM's proposal for one request (max_model_len unbounded)."""
    total = len(tokens)
    if total < min_ngram or k <= 0:
        return []
    rev = tokens[::-1]
    lps = [0] * max_ngram
    longest, position, prev, i = 0, 0, 0, 1
    while i < total:
        if rev[prev] == rev[i]:
            prev += 1
            if prev >= longest:
                longest, position = prev, i
            if i < max_ngram:
                lps[i] = prev
            if prev == max_ngram:
                prev = lps[max_ngram - 1]
            i += 1
        elif prev != 0:
            prev = lps[prev - 1]
        else:
            i += 1
    if longest < min_ngram:
        return []
    start = total - 1 - position + longest
    return tokens[start : start + min(k, total - start)]


def match_lengths_row(tokens: list[int], max_ngram: int) -> list[int]:
    """For each continuation start s, how many tokens before s equal the history's last tokens
    (capped at max_ngram); 0 for s = 0 and s = len(tokens) (nothing would follow)."""
    total = len(tokens)
    out = [0] * total
    for s in range(1, total):
        n = 0
        while n < max_ngram and s - 1 - n >= 0 and tokens[s - 1 - n] == tokens[total - 1 - n]:
            n += 1
        out[s] = n
    return out
