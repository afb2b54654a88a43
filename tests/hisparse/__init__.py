"""Tests of the HiSparse plugin (plugins/specreg_hisparse): layout, swap rules and kernels."""
