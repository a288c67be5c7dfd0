"""The Codex adapter: rollouts into the archive, and ``continuity install|uninstall codex``."""
