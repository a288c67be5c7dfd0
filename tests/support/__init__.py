"""Helpers shared by the test folders (imported, never collected)."""
