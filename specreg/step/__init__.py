"""What runs every step: the chain verifier, draft sampling, draft lengths and acceptance statistics."""
