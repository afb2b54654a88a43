"""`python -m specreg` is the `specreg` command."""

from specreg.cli.command import main

raise SystemExit(main())
