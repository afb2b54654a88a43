"""`python -m specreg` is the `specreg` command."""

from specreg.cli import main

raise SystemExit(main())
