"""Tests of the standalone draft-model plugin (plugins/specreg_draft_model)."""
