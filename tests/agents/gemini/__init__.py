"""The Gemini CLI adapter: sessions into the archive, install, and the hooks."""
