"""The DSpark plugin's kernel families: draft_block, markov_greedy, markov_head (torch)."""
