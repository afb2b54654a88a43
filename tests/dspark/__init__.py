"""Tests of the DSpark/DFlash plugin (plugins/specreg_dspark): kernels, lossless draws, widths."""
