"""Tests of the Medusa plugin (plugins/specreg_medusa)."""
