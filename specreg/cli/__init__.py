"""The `specreg` command: its subcommands, arguments, verdicts and the demo."""
