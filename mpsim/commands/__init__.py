"""CLI subcommands, one module per command family; each exposes `register(subparsers)`."""
