"""EAGLE's kernel families: draft top-k selection, tree build, greedy and sampling verification."""
