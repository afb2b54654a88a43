"""The DSpark plugin's kernel families: draft_block, markov_greedy and markov_head (import torch)."""
