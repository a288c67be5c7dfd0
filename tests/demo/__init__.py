"""``continuity demo`` (``continuity.demo``): a scripted Claude Code session through the hooks,
what it prints, and one demo thread a store."""
