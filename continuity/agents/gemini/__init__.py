"""Gemini CLI: its session files (both forms) archived as threads, its hooks, its install."""

from __future__ import annotations

from continuity.agents.gemini.ingest import detect, ingest_paths

__all__ = ["detect", "ingest_paths"]
