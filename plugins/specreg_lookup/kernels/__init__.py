"""The lookup plugin's kernel families: `ngram_match` (suffix-match lengths and vLLM's chain
proposals), `match_tree` (breadth-first trees over many matches) and `tree_verify` (greedy and
target-only tree verification on the core's greedy tree walk)."""
