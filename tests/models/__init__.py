"""Tests with real transformers models and the real-text benchmark."""
