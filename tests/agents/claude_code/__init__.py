"""The Claude Code adapter: transcripts, ingest, hooks, recall, install, the plugin."""
