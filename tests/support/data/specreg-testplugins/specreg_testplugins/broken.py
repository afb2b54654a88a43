"""Fails at import, as a plugin with a missing dependency would."""

raise ImportError("specreg_testplugins.broken needs a package that is not installed")
