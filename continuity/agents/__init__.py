"""Adapters for coding agents other than Claude Code: each reads its agent's own session files
into threads (one package per agent, one shape)."""
