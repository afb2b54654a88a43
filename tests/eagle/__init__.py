"""Tests of the EAGLE plugin (plugins/specreg_eagle): tree drafting, verification and lossless draws."""
