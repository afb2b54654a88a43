"""Blocks at import far longer than any test's import timeout (a stuck lock, a dead server)."""

import threading

threading.Event().wait(30)
