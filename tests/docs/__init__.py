"""Tests of the documentation: generated pages current, snippets run, pages built and drawn in a real browser."""
