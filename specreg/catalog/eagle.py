"""Catalog entries SR200–SR299: the EAGLE plugin (tree drafting and verification)."""

from specreg.catalog import ErrorEntry

ENTRIES: tuple[ErrorEntry, ...] = ()
