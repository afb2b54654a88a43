"""Tests of the torch-free ground at specreg/'s root: the hook specifications, the error catalog, suggestions."""
