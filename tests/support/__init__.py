"""Helpers shared by the test folders, imported as `from tests.support.<module> import ...`.

eagle, dspark and hisparse hold each plugin's test helpers, fuzz the hypothesis settings and
strategies of the fuzz targets, kernel_inputs the hostile kernel-input strategies, and plugins the
toy plugins the tests register.
"""
