"""Adapters for coding agents other than Claude Code: one subpackage per agent."""
