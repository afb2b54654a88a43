"""Tests of specreg/testing/: the conformance kit and its step loops."""
