"""Kernels shared by several plugins (chain and tree sampling and verification) and input checks.

Modules here import torch; `import specreg` does not import this package.
"""
