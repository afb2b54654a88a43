"""Tests of the example plugin package (examples/specreg-ngram) installed and discovered for real."""
