"""The opencode adapter: its database and exports into the archive, install, the CLI."""
