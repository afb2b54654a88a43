"""Tests of specreg/cli/: the `specreg` command run as a real subprocess, its arguments, verdicts and the demo."""
