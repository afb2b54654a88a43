"""Kernel families (each a plain reference, a torch implementation and a Triton one), chain and tree
verification among them, and the checks and building blocks they share.

Modules here import torch; `import specreg` does not import this package.
"""
