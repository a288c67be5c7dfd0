"""``continuity demo``: what it prints, and one demo thread a store."""
