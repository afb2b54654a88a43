"""Tests of the house as a whole: the import graph, torch-free imports, the public face, the plugin shape."""
