"""Maintainer tools that do not ship in the wheel: documentation generation and mutation testing."""
