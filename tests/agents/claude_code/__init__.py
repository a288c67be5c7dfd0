"""The Claude Code adapter: transcripts, ingest, hooks, restore, install, the demo."""
