"""Test plugins for specreg's loader: each module is one entry point with one behaviour."""
