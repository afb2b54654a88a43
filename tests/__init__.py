"""specreg's test suite: folders mirror the source tree; shared helpers live in tests.support."""
