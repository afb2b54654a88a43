"""Tests of specreg/registry/: loading plugins, registration checks, resolving, the plan and rank consistency."""
